// Live refresh for Brook's dashboard: every few seconds, fetch the page again and
// swap its <main> for the new one. The interval and a pause button live in the
// header; the choice is kept for the tab (sessionStorage). Only this origin is asked.
(function () {
  "use strict";
  var control = document.querySelector("[data-refresh]");
  if (!control) return;
  var select = control.querySelector("[data-refresh-interval]");
  var pause = control.querySelector("[data-refresh-pause]");
  var timer = null;
  var paused = sessionStorage.getItem("brook.refresh.paused") === "1";
  var saved = sessionStorage.getItem("brook.refresh.interval");
  if (saved !== null) select.value = saved;

  function seconds() { return paused ? 0 : Number(select.value); }

  function schedule() {
    if (timer) clearTimeout(timer);
    timer = null;
    pause.textContent = paused ? "Resume" : "Pause";
    var s = seconds();
    if (s > 0) timer = setTimeout(refresh, s * 1000);
  }

  function busy() {
    // Never swap the page under someone typing in a form or with text selected.
    var active = document.activeElement;
    if (active && /^(INPUT|SELECT|TEXTAREA)$/.test(active.tagName) && !control.contains(active)) return true;
    var selection = window.getSelection();
    return selection && String(selection).length > 0;
  }

  function refresh() {
    if (busy()) { schedule(); return; }
    fetch(window.location.href, { credentials: "same-origin", headers: { "x-brook-refresh": "1" } })
      .then(function (response) {
        if (response.redirected || !response.ok) throw new Error(String(response.status));
        return response.text();
      })
      .then(function (text) {
        var fresh = new DOMParser().parseFromString(text, "text/html").getElementById("main");
        var current = document.getElementById("main");
        if (fresh && current) current.replaceWith(fresh);
      })
      .catch(function () { /* the next try may work: the broker may be restarting */ })
      .then(schedule);
  }

  select.addEventListener("change", function () {
    sessionStorage.setItem("brook.refresh.interval", select.value);
    schedule();
  });
  pause.addEventListener("click", function () {
    paused = !paused;
    sessionStorage.setItem("brook.refresh.paused", paused ? "1" : "0");
    schedule();
  });
  schedule();
})();

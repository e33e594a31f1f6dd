"""Stream groups: named, durable cursors over a topic's partitions."""

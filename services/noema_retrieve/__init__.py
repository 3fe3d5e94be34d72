"""The retrieve worker: recalls memories for every new observation and proposes them to attention."""

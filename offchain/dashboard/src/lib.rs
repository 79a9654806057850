//! iota-dashboard: Network dashboard: the training network live in a web page, with JSON endpoints, served from the orchestrator binary. (being built).

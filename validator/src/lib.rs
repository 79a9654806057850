//! iota-validator: Validator daemon: recomputes sampled work, audits butterfly shards, computes CLASP scores and submits verdicts and weights on chain. (being built).

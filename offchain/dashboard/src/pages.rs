//! HTML of every page, rendered with maud from the [`crate::panels`] records.
//!
//! maud escapes every spliced value (`(expr)`), so accounts, keys, run ids and error messages from the
//! network always arrive as text, never as markup; nothing here uses `PreEscaped` on data. The page
//! loads one same-origin script (`/assets/live.js`) and one stylesheet; the content-security policy set by
//! the router forbids anything else (inline scripts, inline styles, other origins).

use iota_primitives::{MinerStatus, Phase, ValidatorStatus, Verdict};
use iota_rpc::types::{EpochSummary, MinerActivity, StageTime, TimeSplit};
use iota_rpc::AccountId;
use maud::{html, Markup, DOCTYPE};

use crate::chart::{format_clock, format_number, LineChart, Series, TickFormat};
use crate::panels::*;
use crate::state::Feed;
use crate::views::{format_balance, EpochTrust};

/// The pages in the navigation bar.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Nav {
	/// `/`.
	Network,
	/// `/stages`.
	Stages,
	/// `/training`.
	Training,
	/// `/trust`.
	Trust,
	/// Pages outside the bar (miner, epoch, errors).
	None,
}

/// The whole document around a page body. `generation` and `refresh_ms` drive the live script.
pub fn layout(title: &str, nav: Nav, generation: u64, refresh_ms: u64, body: Markup) -> Markup {
	let link = |href: &str, label: &str, me: Nav| {
		html! { a href=(href) class=[(nav == me).then_some("active")] { (label) } }
	};
	html! {
		(DOCTYPE)
		html lang="en" data-generation=(generation) data-refresh-ms=(refresh_ms) {
			head {
				meta charset="utf-8";
				meta name="viewport" content="width=device-width, initial-scale=1";
				title { (title) " · iota-rs dashboard" }
				link rel="stylesheet" href="/assets/style.css";
				script src="/assets/live.js" defer {}
			}
			body {
				header {
					span.brand { "iota-rs" }
					nav {
						(link("/", "Network", Nav::Network))
						(link("/stages", "Stages", Nav::Stages))
						(link("/training", "Training", Nav::Training))
						(link("/trust", "Trust & rewards", Nav::Trust))
					}
					span #live-state .pending { "live" }
				}
				main #live { (body) }
				footer { "Every panel has a JSON endpoint under " code { "/api/" } "; money and verdicts are read from chain." }
			}
		}
	}
}

/// A page that says what went wrong (404, 503).
pub fn error_page(title: &str, message: &str) -> Markup {
	html! {
		section.panel.error {
			h2 { (title) }
			p { (message) }
			p { a href="/" { "Back to the network" } }
		}
	}
}

fn feed_note<T>(what: &str, f: &Feed<T>) -> Option<Markup> {
	match f {
		Feed::Ok { .. } => None,
		Feed::Pending => {
			Some(html! { p.note.pending { (what) ": waiting for the first answer…" } })
		},
		Feed::Unavailable { reason } => {
			Some(html! { p.note.down { strong { (what) " unavailable" } ": " (reason) } })
		},
	}
}

/// Health badges of the sources a page uses: `(name, None = waiting / Some(up))`.
fn sources(used: &[(&str, Option<bool>)], updated_ms: u64) -> Markup {
	html! {
		p.sources {
			@for (name, ok) in used {
				@let (class, text) = match ok {
					Some(true) => ("ok", "up"),
					Some(false) => ("down", "unreachable"),
					None => ("pending", "waiting"),
				};
				span class={"badge " (class)} { (name) ": " (text) } " "
			}
			@if updated_ms > 0 { "· updated " (format_clock(updated_ms)) " UTC" }
		}
	}
}

fn ok_of<T>(f: &Feed<T>) -> Option<bool> {
	match f {
		Feed::Pending => None,
		Feed::Ok { .. } => Some(true),
		Feed::Unavailable { .. } => Some(false),
	}
}

/// A short SS58 form for tables (`5Grw…utQY`); the full account is the link's title.
pub fn short(a: &AccountId) -> String {
	let s = a.to_string();
	if s.len() > 12 {
		format!("{}…{}", &s[..6], &s[s.len() - 4..])
	} else {
		s
	}
}

fn miner_link(a: &AccountId) -> Markup {
	let full = a.to_string();
	html! { a.account href={"/miners/" (full)} title=(full) { (short(a)) } }
}

fn account(a: &AccountId) -> Markup {
	let full = a.to_string();
	html! { span.account title=(full) { (short(a)) } }
}

fn phase_name(p: Phase) -> &'static str {
	match p {
		Phase::Training => "Training",
		Phase::WeightsUploading => "WeightsUploading",
		Phase::Merging => "Merging",
	}
}

fn miner_status(s: &MinerStatus<u32>) -> String {
	match s {
		MinerStatus::Active => "active".into(),
		MinerStatus::Leaving => "leaving".into(),
		MinerStatus::Unbonding { until, last_epoch } => {
			format!("unbonding (block {until}, last epoch {last_epoch})")
		},
	}
}

fn validator_status(s: &ValidatorStatus<u32>) -> String {
	match s {
		ValidatorStatus::Active => "active".into(),
		ValidatorStatus::Unbonding { until } => format!("unbonding (block {until})"),
	}
}

fn bytes(b: f64) -> String {
	format!("{}B", format_number(b))
}

fn ppb_percent(p: u32) -> String {
	format!("{:.2} %", f64::from(p) / 1e7)
}

/// `/`.
pub fn network(p: &NetworkPanel) -> Markup {
	html! {
		(sources(&[("orchestrator", ok_of(&p.orchestrator)), ("chain", ok_of(&p.chain))], p.updated_ms))
		section.panel #run {
			h2 { "Run" }
			@if let Some(n) = feed_note("orchestrator", &p.orchestrator) { (n) }
			@if let Some(o) = p.orchestrator.data() {
				dl.kv {
					dt { "run" } dd #run-id { (o.run) }
					dt { "spec hash" } dd { code { (o.spec_hash) } }
					@if let Some(agrees) = p.spec_hash_agrees {
						dt { "matches chain model_hash" } dd class=(if agrees { "ok" } else { "bad" }) { (if agrees { "yes" } else { "NO" }) }
					}
					@if let Some(s) = &o.spec {
						dt { "model" } dd #model {
							(s.preset.as_deref().unwrap_or("custom")) " · d_model " (s.d_model) " · " (s.n_layers) " blocks"
							@if let Some(params) = s.params { " · " (format_number(params as f64)) " parameters" }
						}
						dt { "stages" } dd #stage-count { (s.stages) }
						dt { "compression" } dd {
							"width " (s.d_model) " → " (s.wire_width) " (" (format!("{:.0}", s.width_ratio)) "×), "
							(s.encoding) " on the wire: " (format!("{:.0}", s.compression)) "× vs bf16"
						}
						dt { "tokens per sample" } dd { (s.tokens_per_sample) }
					}
					dt { "current epoch" } dd #current-epoch { (o.current_epoch) }
					dt { "epochs completed" } dd { (o.epochs_completed) }
					dt { "last epoch loss" } dd #last-loss {
						@match o.last_epoch_loss { Some(l) => (format!("{l:.4}")), None => "–" }
					}
					dt { "tokens trained" } dd #tokens-trained { (format_number(o.tokens_trained as f64)) }
					dt { "tokens/s" } dd #tokens-per-sec { (format_number(o.tokens_per_sec)) }
					dt { "wire bytes" } dd { (bytes(o.wire_bytes as f64)) }
					dt { "miners seen" } dd #miners-seen { (o.miners_seen) }
				}
			}
		}
		section.panel #chain {
			h2 { "Chain" }
			@if let Some(n) = feed_note("chain", &p.chain) { (n) }
			@if let Some(c) = p.chain.data() {
				dl.kv {
					dt { "best block" } dd #best-block { (c.best_block) }
					dt { "finalized block" } dd #finalized-block { (c.finalized_block) }
					@if let Some(r) = &c.run_config {
						dt { "stages (run config)" } dd { (r.stages) }
						dt { "bottleneck width" } dd { (r.bottleneck_width) }
						dt { "epoch quota" } dd #epoch-quota { (r.backward_quota) " backward passes per stage" }
						dt { "emission per epoch (tokens)" } dd { (format_balance(r.emission_per_epoch)) }
					} @else {
						dt { "run config" } dd { "none set" }
					}
					dt { "miners registered" } dd #miners-registered { (c.miners_registered) }
					dt { "validators registered" } dd #validators-registered { (c.validators_registered) }
					dt { "next epoch to pay out" } dd { (c.next_epoch_to_finalize) }
					dt { "minted so far (tokens)" } dd { (format_balance(c.total_minted)) }
				}
			}
		}
	}
}

/// `/stages`.
pub fn stages(p: &StagesPanel) -> Markup {
	html! {
		(sources(&[("orchestrator", ok_of(&p.stages)), ("chain", ok_of(&p.chain))], p.updated_ms))
		@if let Some(n) = feed_note("orchestrator", &p.stages) { section.panel { (n) } }
		@if let Some(rows) = p.stages.data() {
			@for row in rows {
				@let st = &row.status;
				section.panel.stage id={"stage-" (st.stage)} {
					h2 { "Stage " (st.stage) " · " span.phase { (phase_name(st.phase)) } " · epoch " (st.epoch) }
					dl.kv {
						dt { "backward done" } dd {
							(st.backward_done)
							@if let Some(q) = row.backward_quota { " / " (q) }
						}
						dt { "queues" } dd { (st.forward_queue) " forward, " (st.backward_queue) " backward" }
						dt { "leases in flight" } dd { (st.leases) }
						dt { "gradients submitted" } dd { (st.gradients_submitted) }
						dt { "merge shards" } dd { (st.shards_present) " / " (st.shards_expected) " present" }
					}
					table.miners {
						thead { tr { th { "miner" } th { "status" } th { "samples (epoch)" } th { "samples (total)" }
							th { "items/s" } th { "leases" } th { "expired" } th { "refused" } th { "last seen" } } }
						tbody {
							@for m in &row.miner_rows {
								tr.miner {
									td { (miner_link(&m.account)) }
									td { @match &m.chain_status { Some(s) => (miner_status(s)), None => "–" } }
									@if let Some(a) = &m.activity {
										td { (a.samples_this_epoch) } td { (a.samples_total) }
										td { @match m.items_per_sec { Some(r) => (format_number(r)), None => "–" } }
										td { (a.leases) } td { (a.leases_expired) } td.refused { (refusals(a)) }
										td { (format_clock(a.last_seen_ms)) }
									} @else {
										td colspan="7" { "never called the orchestrator" }
									}
								}
							}
						}
					}
				}
			}
		}
		section.panel #chain-stages {
			h2 { "On chain" }
			@if let Some(n) = feed_note("chain", &p.chain) { (n) }
			@if let Some(cs) = p.chain.data() {
				table {
					thead { tr { th { "stage" } th { "phase" } th { "epoch" } th { "since block" } th { "round" } th { "members" } } }
					tbody {
						@for s in cs {
							tr { td { (s.stage) } td { (phase_name(s.phase)) } td { (s.epoch) } td { (s.phase_since) } td { (s.round) }
								td { @for m in &s.members { (miner_link(m)) " " } } }
						}
					}
				}
			}
		}
		section.panel #phase-events {
			h2 { "Recent phase changes" }
			@if p.phase_events.is_empty() { p.empty { "none seen yet" } }
			ul {
				@for e in p.phase_events.iter().rev() {
					li { "block " (e.block) ": stage " (e.stage) " → " (phase_name(e.phase)) " (epoch " (e.epoch) ")" }
				}
			}
		}
	}
}

/// `/training`.
pub fn training(p: &TrainingPanel) -> Markup {
	let chart_sections = p.orchestrator.data().map(|t| {
		// The tail's training loss, and the merged model's held-out loss where the orchestrator
		// evaluated it (runs with a held-out set).
		let loss_lines = |x: &dyn Fn(&EpochSummary) -> f64| {
			let mut v = vec![Series {
				name: "mean tail loss (training)".into(),
				points: t.epochs.iter().map(|e| (x(e), f64::from(e.loss))).collect(),
			}];
			let held: Vec<(f64, f64)> = t
				.epochs
				.iter()
				.filter_map(|e| e.heldout_loss.map(|h| (x(e), f64::from(h))))
				.collect();
			if !held.is_empty() {
				v.push(Series { name: "merged model (held-out)".into(), points: held });
			}
			v
		};
		let loss_epoch = LineChart {
			title: "Loss per epoch".into(),
			x_label: "epoch".into(),
			y_label: "loss (nats)".into(),
			x_format: TickFormat::Number,
			series: loss_lines(&|e| f64::from(e.epoch)),
		};
		let loss_tokens = LineChart {
			title: "Loss per tokens trained".into(),
			x_label: "tokens".into(),
			y_label: "loss (nats)".into(),
			x_format: TickFormat::Number,
			series: loss_lines(&|e| e.tokens_cumulative as f64),
		};
		let stages = t.history.iter().map(|h| h.stage_tokens_per_sec.len()).max().unwrap_or(0);
		let mut series: Vec<Series> = (0..stages)
			.map(|s| Series {
				name: format!("stage {s}"),
				points: t
					.history
					.iter()
					.filter_map(|h| {
						h.stage_tokens_per_sec.get(s).copied().flatten().map(|r| (h.t_ms as f64, r))
					})
					.collect(),
			})
			.collect();
		series.push(Series {
			name: "orchestrator (1 min)".into(),
			points: t.history.iter().map(|h| (h.t_ms as f64, h.tokens_per_sec)).collect(),
		});
		let throughput = LineChart {
			title: "Tokens/s per stage over time".into(),
			x_label: "time (UTC)".into(),
			y_label: "tokens/s".into(),
			x_format: TickFormat::ClockMs,
			series,
		};
		let wire = LineChart {
			title: "Wire bytes per token, per epoch".into(),
			x_label: "epoch".into(),
			y_label: "bytes/token".into(),
			x_format: TickFormat::Number,
			series: vec![Series {
				name: "activations + gradients".into(),
				points: t
					.epochs
					.iter()
					.filter(|e| e.tokens > 0)
					.map(|e| (f64::from(e.epoch), e.wire_bytes as f64 / e.tokens as f64))
					.collect(),
			}],
		};
		(loss_epoch.render(), loss_tokens.render(), throughput.render(), wire.render())
	});
	html! {
		(sources(&[("orchestrator", ok_of(&p.orchestrator))], p.updated_ms))
		@if let Some(n) = feed_note("orchestrator", &p.orchestrator) { section.panel { (n) } }
		@if let (Some(t), Some((a, b, c, d))) = (p.orchestrator.data(), chart_sections) {
			section.panel #training-summary {
				h2 { "Training" }
				dl.kv {
					dt { "tokens trained" } dd { (format_number(t.tokens_trained as f64)) }
					dt { "tokens/s" } dd { (format_number(t.tokens_per_sec)) }
					dt { "wire bytes per token" } dd #wire-per-token {
						@match t.wire_bytes_per_token { Some(w) => (format!("{w:.1}")), None => "–" }
					}
				}
			}
			section.panel.charts { (a) (b) }
			section.panel.charts { (c) (d) }
			section.panel #epochs {
				h2 { "Completed epochs" }
				@if t.epochs.is_empty() { p.empty { "no epoch completed yet" } }
				@else {
					table {
						thead { tr { th { "epoch" } th { "loss" } th title="the merged model on the run's held-out rows" { "held-out" } th { "samples" } th { "tokens" } th { "wire bytes/token" } th { "duration" } th { "merge" }
							th title="from the last stage's quota of the previous epoch to this epoch's first sample" { "quota → start" }
							th { "extrinsics" } } }
						tbody {
							@for e in t.epochs.iter().rev() {
								tr.epoch {
									td { a href={"/epochs/" (e.epoch)} { (e.epoch) } }
									td.loss { (format!("{:.4}", e.loss)) }
									td.heldout { @match e.heldout_loss { Some(h) => (format!("{h:.4}")), None => "–" } }
									td { (e.samples) } td { (format_number(e.tokens as f64)) }
									td { @if e.tokens > 0 { (format!("{:.1}", e.wire_bytes as f64 / e.tokens as f64)) } @else { "–" } }
									td { (format!("{:.1} s", e.completed_ms.saturating_sub(e.started_ms) as f64 / 1000.0)) }
									td { (format!("{:.1} s", e.merge_ms as f64 / 1000.0)) }
									td { @match e.quota_to_start_ms { Some(ms) => (secs(ms)), None => "–" } }
									td { (e.extrinsics) }
								}
							}
						}
					}
				}
			}
			section.panel #time-split {
				h2 { "Where each stage's time goes" }
				p.note { "Per stage and epoch, from entering the epoch to its merge committed: training (a lease out), "
					"merge (gradient upload, butterfly, step), chain wait (the stage held up by the chain: its call due to the pool accepting it where the orchestrator acts on the predicted effect, else to its block), "
					"idle (training phase with nothing to do: pipeline bubbles, waiting for the next block)." }
				@if let Some(e) = t.epochs.iter().rev().find(|e| !e.stages.is_empty()) {
					(time_split(&t.epochs))
					p { "Latest epoch (" (e.epoch) "): " (split_shares(&e.stages)) }
				} @else { p.empty { "no epoch completed yet" } }
			}
		}
	}
}

fn secs(ms: u64) -> String {
	format!("{:.1} s", ms as f64 / 1000.0)
}

/// Shares of the four parts summed over `stages`, as text.
fn split_shares(stages: &[StageTime]) -> String {
	match TimeSplit::of(stages) {
		Some(t) => format!("{} of stage-time", t.shares()),
		None => "–".into(),
	}
}

/// The per-stage split of the recent epochs, newest first.
fn time_split(epochs: &[EpochSummary]) -> Markup {
	html! {
		table.time-split {
			thead { tr { th { "epoch" } th { "stage" } th { "training" } th { "merge" } th { "chain wait" } th { "idle" } th { "span" } } }
			tbody {
				@for e in epochs.iter().rev().take(20) {
					@for t in &e.stages {
						tr.stage-time {
							td { a href={"/epochs/" (e.epoch)} { (e.epoch) } } td { (t.stage) }
							td { (secs(t.training_ms)) } td { (secs(t.merge_ms)) } td { (secs(t.chain_wait_ms)) }
							td { (secs(t.idle_ms)) } td { (secs(t.total_ms())) }
						}
					}
				}
			}
		}
	}
}

/// A miner's refusals: the total and what they were (`wrong_phase 2, lease_expired 1`).
fn refusals(a: &MinerActivity) -> Markup {
	html! {
		(a.refused)
		@if !a.refusals.is_empty() {
			" (" (a.refusals.iter().map(|(c, n)| format!("{c} {n}")).collect::<Vec<_>>().join(", ")) ")"
		}
	}
}

fn verdict(v: Verdict) -> Markup {
	match v {
		Verdict::Pass => html! { span.ok { "pass" } },
		Verdict::Fail => html! { span.bad { "FAIL" } },
	}
}

fn epoch_trust(e: &EpochTrust) -> Markup {
	html! {
		section.panel.epoch id={"epoch-" (e.epoch)} {
			h2 {
				a href={"/epochs/" (e.epoch)} { "Epoch " (e.epoch) }
				" · "
				@if e.finalized { "paid out" } @else if e.completed_at.is_some() { "complete, scoring" } @else { "in progress" }
			}
			h3 { "Spot-check verdicts" }
			@if e.verdicts.is_empty() { p.empty { "none" } } @else {
				table { thead { tr { th { "miner" } th { "validator" } th { "verdict" } th { "evidence" } } }
					tbody { @for v in &e.verdicts {
						tr { td { (miner_link(&v.miner)) } td { (account(&v.validator)) } td { (verdict(v.verdict)) } td { code { (v.evidence) } } }
					} } }
			}
			h3 { "Consensus scores and emission" }
			@if e.scores.is_empty() && e.emission.is_none() { p.empty { "not finalized yet" } } @else {
				table { thead { tr { th { "miner" } th { "score" } th { "paid (tokens)" } } }
					tbody { @for s in &e.scores {
						tr { td { (miner_link(&s.miner)) } td { (ppb_percent(s.ppb)) }
							td { @match e.emission.as_ref().and_then(|em| em.miners.iter().find(|p| p.account == s.miner)) {
								Some(p) => (format_balance(p.amount)), None => "0" } } }
					} } }
				@if let Some(em) = &e.emission {
					p { "validators: "
						@for v in &em.validators { (account(&v.account)) " " (format_balance(v.amount)) "; " }
						"unallocated: " (format_balance(em.unallocated)) }
				}
			}
			h3 { "Slashes" }
			@if e.slashes.is_empty() { p.empty { "none" } } @else {
				ul { @for s in &e.slashes { li.bad { (miner_link(&s.account)) " lost " (format_balance(s.amount)) " tokens" } } }
			}
			h3 { "Merge manifests" }
			@if e.manifests.is_empty() { p.empty { "none committed" } } @else {
				table { thead { tr { th { "stage" } th { "members" } th { "samples" } th { "shards" } th { "state hash" } th { "checkpoint" } } }
					tbody { @for m in &e.manifests {
						tr { td { (m.stage) } td { (m.members) } td { (m.samples) }
							td { details { summary { (m.shards.len()) } ul { @for s in &m.shards { li { code { (s.key) } } } } } }
							td { code { (m.state_hash) } }
							td { @match &m.checkpoint { Some(c) => code { (c.key) }, None => "–" } } }
					} } }
			}
		}
	}
}

/// `/trust`.
pub fn trust(p: &TrustPanel) -> Markup {
	html! {
		(sources(&[("chain", ok_of(&p.chain))], p.updated_ms))
		@if let Some(n) = feed_note("chain", &p.chain) { section.panel { (n) } }
		@if let Some(t) = p.chain.data() {
			section.panel #validators {
				h2 { "Validators" }
				table { thead { tr { th { "validator" } th { "stake (tokens)" } th { "status" } th { "last weights at" } } }
					tbody { @for v in &t.validators {
						tr { td { (account(&v.account)) } td { (format_balance(v.stake)) } td { (validator_status(&v.status)) }
							td { @match v.last_weights_at { Some(b) => (b), None => "–" } } }
					} } }
				p { "next epoch to pay out: " (t.next_epoch_to_finalize) " · minted so far: " (format_balance(t.total_minted)) " tokens" }
			}
			@if t.epochs.is_empty() { section.panel { p.empty { "no epoch yet" } } }
			@for e in &t.epochs { (epoch_trust(e)) }
		}
	}
}

/// `/miners/{account}`.
pub fn miner(p: &MinerPanel) -> Markup {
	let chart = LineChart {
		title: "Work items completed".into(),
		x_label: "time (UTC)".into(),
		y_label: "items".into(),
		x_format: TickFormat::ClockMs,
		series: vec![Series {
			name: "total".into(),
			points: p.samples.iter().map(|(t, n)| (*t as f64, *n as f64)).collect(),
		}],
	};
	html! {
		(sources(&[("orchestrator", ok_of(&p.activity)), ("chain", ok_of(&p.chain))], 0))
		section.panel #miner {
			h2 { "Miner " span.account-full { (p.account) } }
			@if let Some(n) = feed_note("orchestrator", &p.activity) { (n) }
			@match p.activity.data() {
				Some(Some(a)) => dl.kv {
					dt { "stage" } dd { (a.stage) }
					dt { "samples this epoch" } dd #miner-samples-epoch { (a.samples_this_epoch) }
					dt { "samples total" } dd #miner-samples-total { (a.samples_total) }
					dt { "leases held" } dd { (a.leases) }
					dt { "leases expired" } dd { (a.leases_expired) }
					dt { "backward passes this epoch" } dd #miner-backward-epoch { (a.backward_this_epoch) }
					dt { "restarts" } dd #miner-restarts { (a.restarts) }
					dt { "silences (passes re-listed)" } dd #miner-gone { (a.gone) }
					dt { "requests refused" } dd #miner-refused { (refusals(a)) }
					dt { "last seen" } dd { (format_clock(a.last_seen_ms)) " UTC" }
				},
				Some(None) => p.empty { "The orchestrator has not seen this miner." },
				None => {},
			}
			(chart.render())
		}
		section.panel #miner-chain {
			h2 { "On chain" }
			@if let Some(n) = feed_note("chain", &p.chain) { (n) }
			@if let Some(c) = p.chain.data() {
				@match &c.record {
					Some(r) => dl.kv {
						dt { "stage" } dd { (r.stage) }
						dt { "status" } dd { (miner_status(&r.status)) }
						dt { "bond (tokens)" } dd { (format_balance(r.bond)) }
						dt { "registered at block" } dd { (r.registered_at) }
					},
					None => p.empty { "no miner record (never registered, or left)" },
				}
				h3 { "Verdicts, scores and rewards" }
				@if c.epochs.is_empty() { p.empty { "nothing recorded in the recent epochs" } } @else {
					table { thead { tr { th { "epoch" } th { "verdicts" } th { "score" } th { "reward (tokens)" } th { "slashed (tokens)" } } }
						tbody { @for e in &c.epochs {
							tr { td { a href={"/epochs/" (e.epoch)} { (e.epoch) } }
								td { @for v in &e.verdicts { (verdict(v.verdict)) " by " (account(&v.validator)) "; " } }
								td { @match e.score_ppb { Some(s) => (ppb_percent(s)), None => "–" } }
								td { @match e.reward { Some(r) => (format_balance(r)), None => "–" } }
								td { @match e.slashed { Some(s) => span.bad { (format_balance(s)) }, None => "–" } } }
						} } }
				}
			}
		}
	}
}

/// `/epochs/{epoch}`.
pub fn epoch(p: &EpochPanel) -> Markup {
	html! {
		section.panel #epoch-summary {
			h2 { "Epoch " (p.epoch) }
			@if let Some(n) = feed_note("orchestrator", &p.summary) { (n) }
			@match p.summary.data() {
				Some(Some(e)) => dl.kv {
					dt { "loss" } dd { (format!("{:.4}", e.loss)) }
					dt { "samples" } dd { (e.samples) }
					dt { "tokens" } dd { (e.tokens) " (" (format_number(e.tokens_cumulative as f64)) " since the start)" }
					dt { "wire bytes" } dd { (bytes(e.wire_bytes as f64)) }
					dt { "duration" } dd { (format!("{:.1} s", e.completed_ms.saturating_sub(e.started_ms) as f64 / 1000.0)) }
					dt { "merge time (all stages)" } dd { (format!("{:.1} s", e.merge_ms as f64 / 1000.0)) }
					dt { "last quota → this epoch's first sample" } dd { @match e.quota_to_start_ms { Some(ms) => (secs(ms)), None => "–" } }
					dt { "extrinsics (orchestrator)" } dd { (e.extrinsics) }
					@if !e.stages.is_empty() { dt { "time split" } dd { (split_shares(&e.stages)) } }
				},
				Some(None) => p.empty { "not complete yet" },
				None => {},
			}
		}
		@if let Some(n) = feed_note("chain", &p.trust) { section.panel { (n) } }
		@if let Some(t) = p.trust.data() { (epoch_trust(t)) }
	}
}

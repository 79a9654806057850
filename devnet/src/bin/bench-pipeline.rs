//! `bench-pipeline`: the pipeline against the single-process trainer on the same tokens, in one run.
//!
//! What it runs, one after the other (never two at once, so they do not share the CPU with each other):
//! 1. For each `--miners M` (default 1 and 2): a whole network through [`iota_devnet::Network`] (dev node,
//!    orchestrator with the embedded S3 server, `stages × M` real `iota-miner` processes with one compute
//!    thread each, `--validators` validators), trained for `--epochs E` epochs of `--quota Q` samples.
//! 2. The single-process baseline ([`iota_model::Pipeline`]) on exactly the samples the networks trained:
//!    sample `s` is `spec.data.locate(s)` of the network's run spec, read from the embedded bucket folder
//!    and checked against the spec's BLAKE3; epoch `e` is samples `e·Q .. (e+1)·Q` in that order, then one
//!    optimizer step with `spec.step_options(e)` (same AdamW, learning-rate schedule and per-stage
//!    clipping), as docs/design.md §3 says the pipeline's epoch is. With `--training local…` the
//!    baseline instead steps every `accumulate` samples: the replicas' batch per inner step and their
//!    optimizer steps per token (for 3 × 1), with no outer step. Two baselines:
//!    - `baseline`: the same blocks without the bottleneck and without a wire (the uncompressed reference
//!      every distributed figure is compared with, docs/design.md §5);
//!    - `baseline+cut`: the network's model (bottleneck at `d_model / --width-ratio`) with every cut sent
//!      through the spec's wire codec in process. The pipeline should match it up to float summation
//!      order: this isolates what distribution costs from what compression costs.
//!
//! What it prints:
//! - tokens/s of each run: the pipeline's is `Σ tokens / (last epoch's commit − first epoch's first
//!   sample)` from the orchestrator's `EpochSummary` (network start-up excluded; chain phases, gradient
//!   upload, butterfly and step included); the baseline's is tokens over its forward/backward/step time.
//!   The ratio against `baseline` has the goal ≥ 0.8 for 3 × 1.
//! - the loss ratio at equal tokens, per epoch and at the last epoch: the pipeline's mean tail loss of the
//!   epoch (`EpochSummary.loss`, nats) over the baseline's mean loss on the same samples with the same
//!   number of optimizer steps behind it. Goal ≤ 1.03 with 128x compression.
//! - merge bytes per token: the merge vectors every replica submits per epoch in the run's codec
//!   (`iota_protocol::chunks::submission_len`), against a sync-mode network with f32 vectors taking as
//!   many optimizer steps per token.
//! - wire bytes per token (`EpochSummary.wire_bytes`: activations and activation gradients accepted by
//!   the orchestrator) against the uncompressed wire: bf16 activations of width `d_model`, i.e.
//!   `2 · d_model` bytes per token per cut per direction, `4 · d_model · (stages − 1)` per token.
//!   "128x" is nominal: width `d_model / 64` is 64x narrower, and u8 elements are half of bf16's, so the
//!   element payload is 128x smaller; the u8 codec adds an f32 scale and offset per token (8 bytes) and a
//!   safetensors header per message, which the measured ratio includes.
//! - load average before and after each run (other processes on the machine distort absolute numbers;
//!   the ratios are measured in the same run).
//!
//! The numbers also go to `runs/bench-<time>/bench.json`; after each network the miners' objects are
//! deleted from its bucket folder (over 1 GB per network at the defaults) unless `--keep-objects`.
//! Example: `cargo run -p iota-devnet --bin bench-pipeline -- --ffn-dim 1536` (4 epochs: about 11 minutes
//! on 2 shared cores; each epoch adds ~2 minutes). Not a test: it asserts nothing about speed.
//!
//! ## Measured again, 3 × 2 only (2 cores, debug build, 8 Dec 2026: the miner crate at opt-level 3)
//! `--training local:2:1:0 --merge-codec int8 --ffn-dim 1536 --quota 64 --epochs 3 --lr 1e-3 --miners 2
//! --no-cut-baseline`, once the miner's own loops over whole states (gradient accumulation, state copies)
//! are compiled at opt-level 3 in the dev profile: baseline 656 tokens/s, pipeline 585 (**0.892**; 0.852
//! on the tree before, 0.871 in the run below); last-epoch loss **1.074** (1.063, 1.062, 1.074 per epoch:
//! the change moves no number the loss depends on); CPU miners 74.0 %, orchestrator with its embedded S3
//! server 14.7 %, node 3.6 %; stage-time training 69.3 %, idle 26.1 %. Run again with glibc's malloc
//! told to keep buffers up to 32 MiB in its heap and never trim it (`GLIBC_TUNABLES=
//! glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=1073741824`: the miners' profile
//! shows page faults and page zeroing): 0.886 and loss 1.060, no faster, so nothing is set.
//!
//! ## Measured again, 3 × 2 only (2 cores, debug build, 7 Dec 2026: the CPU split, an outer lr of 2)
//! `--miners 2 --no-cut-baseline` with the command below, once per `--training`, and the machine's CPU
//! split by role now printed (from `/proc`, start-up excluded). `local:2:1:0` (averaging): baseline 626
//! tokens/s, pipeline 545 (**0.871**), last-epoch loss **1.060** (1.063, 1.055, 1.060 per epoch; 1.073
//! in the run below: the spread between runs); CPU miners 73.9 %, orchestrator with its embedded S3
//! server 14.6 %, node 3.6 %, the rest (~8 %) idle or other processes; stage-time training 66.9 %, idle 28.7 %. `local:2:2:0` (the
//! two replicas' deltas summed rather than averaged, as if taken one after the other): 0.838 and loss
//! **1.118** (1.066, 1.123, 1.118): worse, so averaging stays the default. So with no validators the
//! miners get about three quarters of the 2 cores, and the stage-time idle share is mostly time a stage
//! waits for a core, not for work.
//!
//! ## Measured again, local mode (2 cores, debug build, 7 Dec 2026: held getWork, weight stashing, bound 2)
//! The same command, after three changes: an idle `iota_getWork` is held until the miner has work (it
//! had been told to come back in 250 ms, at every hop of every sample); a backward through a forward
//! kept from before an inner step runs at that forward's weights (stashed), not at the moved ones; and
//! the head's default bound is the run's `accumulate` (2), so a head backward comes at most one inner
//! step late. Baseline 626 tokens/s; pipeline 3 × 1 525 (**0.839**), 3 × 2 512 (**0.818**); loss at
//! equal tokens 1.021, 1.021, **1.022** per epoch for 3 × 1 (1.007 against `baseline+cut`), **1.073** for
//! 3 × 2 (1.057); stage-time training 47.0 % / 67.5 %, idle 49.4 / 28.4 %. Single 3 × 1 runs
//! (`--miners 1 --no-cut-baseline`, last-epoch loss ratio / tokens/s ratio), to tell the changes
//! apart: before them 1.070 / 0.844 (1.070 / 0.864 with no reveals at all: the 2.2 GB of reveal traffic
//! costs no measurable throughput here); the held request and the stash at the old bound of 4: 1.058
//! / 0.849; bound 3: 1.057 / 0.863; bound 2: 1.021 / 0.805; bound 1 (one sample at a time, before the
//! changes): 1.015 / 0.301, exactly `baseline+cut`'s loss in every epoch, which shows what is left at 2
//! is the one step of lateness. Before the held request a bound of 3 had cost throughput (0.721); with
//! it the pipeline fills at small bounds. 3 × 2 stays above the 5 % goal: its two replicas per stage
//! each take half the inner steps and are averaged at the merge, while the baseline steps every
//! `accumulate` samples of the whole stream (the baseline matches 3 × 1's optimizer steps per token).
//!
//! ## Measured again, local mode (2 cores, debug build, 7 Dec 2026, a head miner's samples in flight bounded)
//! The same command, with the orchestrator's default `--max-in-flight` of stages + 1 (4): baseline 652
//! tokens/s; pipeline 3 × 1 486 (**0.745**), 3 × 2 506 (**0.776**); stage-time training 51.0 % /
//! 72.1 %, idle 45.8 / 23.9 %. Loss at equal tokens 1.030, 1.071, **1.089** per epoch for 3 × 1 (1.073
//! against `baseline+cut`), 1.085 for 3 × 2. Why the bound: the tail's loss per sample (a debug line of
//! the miner) jumped from ~6.5 to ~7.5 at the first samples of every epoch after the first, and took ~20
//! samples to come back, while the baseline's on the same samples did not move (6.30 → 5.88), nor did the
//! weights at the merge (with one replica, outer lr 1 and no momentum the merged weights were 2e-7 from
//! the replica's own, L2). Unbounded, the head ran its forwards far ahead of its backward passes (sample
//! 32's backward 12 inner steps after its forward), so the tail was trained on codes of weights a dozen
//! steps old and met the current ones only when the next epoch started. Single 3 × 1 runs of
//! `--miners 1` with the bound set through `IOTA_MAX_IN_FLIGHT` (last-epoch loss ratio, tokens/s ratio):
//! none 1.106 / 0.813 (1.122 / 0.795 and 1.104 with f32 merges), 6: 1.084 / 0.843, 4: 1.058 / 0.841, 3:
//! 1.057 / 0.721 (idle 57 %). The runs spread by ~0.03 in loss and ~0.05 in tokens/s from one to the
//! next on the same settings (this table's 1.089 / 0.745 against 1.058 / 0.841 for the bound of 4), so
//! the choice of S + 1 rests on the staleness it guarantees (at most 2 inner steps at the head) more
//! than on these differences.
//!
//! ## Measured again, local mode (2 cores, debug build, 6 Dec 2026, reveals uploaded in a task of their own)
//! The same command, with each challenged state's PUT no longer awaited in the miner's loop: baseline
//! 541 tokens/s; pipeline 3 × 1 375 (**0.693**), 3 × 2 362 (**0.669**); stage-time training 58.8 % /
//! 77.6 %, idle 38.6 / 19.0 %; loss at equal tokens 1.105 (3 × 1) and 1.171 (3 × 2). Within the
//! run-to-run spread of the run below (0.639 / 0.713): here the PUT goes to the embedded S3 server on
//! the same 2 cores, so what it costs is CPU, which a task of its own does not remove (the 3 × 1
//! network still moved 2.2 GB of objects in 3 epochs). In the default 10-epoch devnet (also on this
//! machine) the six miners logged 409 reveal PUTs of 56.7 MB, 2.1 s each on average (4.8 s at most):
//! about 145 s per miner, over 957 s of training, that its loop no longer waits through; the devnet's
//! stage-time training share was 78.1 % against 74.3 % in the run before this change. Over a slow
//! link (20 Mbit/s: ~23 s per state) the difference grows with the upload time.
//!
//! ## Measured again, local mode (2 cores, debug build, 6 Dec 2026, after int8 stopped carrying error feedback)
//! The same command: baseline 551 tokens/s; pipeline 3 × 1 352 (**0.639**), 3 × 2 393 (**0.713**);
//! mean epoch 46.1 s / 41.2 s; stage-time training 58.1 % / 72.0 %, merge 2.3 / 3.0 %, chain wait 0.4 /
//! 0.5 %, idle 39.2 / 24.5 %. Loss at equal tokens 1.024, 1.074, **1.112** per epoch for 3 × 1 (1.095
//! against `baseline+cut`), 1.104 for 3 × 2. Merge bytes per token unchanged (127.9x below sync f32).
//! Against the 4 Dec run the throughput fell: since then every challenged step reveals the earlier states
//! its passes ran at, 3 challenges per miner per epoch of 2-4 states each (a state is 12·P bytes, 45 MB
//! for a 3.7 M-parameter stage): the 3 × 1 network moved 2.06 GB of objects in 3 epochs, uploaded from
//! each miner's loop and stored by the orchestrator's embedded S3 server on the same 2 cores. The
//! miners' logs also say why the loss stays ~10 % above the baseline: 62 of the 64 backward passes of
//! stages 0 and 1 per epoch ran through a forward kept from an earlier inner step (one step stale); the
//! in-process baseline never is. Removing that needs a pipeline flush per inner step; by the usual
//! bubble estimate ((S − 1) / (M + S − 1) with 2 micro-batches per step and 3 stages) each stage would
//! idle half the time, so it was not tried.
//!
//! ## Measured, local mode (2 cores, debug build with the math crates at opt-level 3, 4 Dec 2026)
//! `--training local:2:1:0 --merge-codec int8 --ffn-dim 1536 --quota 64 --epochs 3 --lr 1e-3` (no
//! validators; about 9 minutes): baseline 740 tokens/s; pipeline 3 × 1 584 (**0.789**), 3 × 2 587
//! (**0.793**), goal ≥ 0.8 just missed; mean epoch 27.8 s; stage-time training 59.3 % / 68.2 %, merge 3.1
//! / 4.1 %, chain wait 0.5 / 0.6 %, idle 37.0 / 27.0 % (the compute-share goal of 85 % missed: the
//! pipeline's bubbles). Loss at equal tokens against the baseline stepping every 2 samples: 1.026, 1.071,
//! **1.103** per epoch for 3 × 1 (1.090 against `baseline+cut`), 1.119 for 3 × 2: the 5 % goal missed.
//! With one replica per stage the merge only quantises the delta (int8 with error feedback); the rest of
//! what differs from the baseline is the pipeline's weight staleness (a backward runs through a forward
//! kept from an earlier inner step, which the in-process baseline never does). This run does not
//! separate the two. Merge bytes per token: 589 (3 × 1) and 1 179
//! (3 × 2) against 75 357 and 150 714 for sync mode with f32 vectors at the same optimizer steps per
//! token: **127.9x less** (goal ≥ 30x met).
//!
//! ## Measured (2 cores, debug build with the math crates at opt-level 3, 2 Dec 2026)
//! `--ffn-dim 1536 --miners 1 --epochs 4` (2 min 20 s), once stages go on at the pool's acceptance of
//! the driver's calls (predicted chain views, the block awaited in the background): tokens/s 459 vs the
//! baseline's 745 (**0.616**); the loss equals `baseline+cut` in every epoch; mean epoch 13.2 s;
//! stage-time training 55.3 %, merge 14.4 %, **chain wait 1.4 %**, idle 29.0 %; last quota → next
//! epoch's first sample 2.9 s on average (3.2 s max); 4, 4, 4, 3 orchestrator extrinsics per epoch. The
//! same command just before this change: 0.567, chain wait 11.0 %, 5.2 s, 6 extrinsics per epoch; after
//! the review's fixes to the revert path: 448 vs 647 (0.692), chain wait 1.7 %, 2.9 s, 4–5 extrinsics.
//!
//! ## Measured (2 cores, debug build with the math crates at opt-level 3, 1–2 Dec 2026)
//! `--ffn-dim 1536 --miners 1 --epochs 4` (4 minutes), after the chain left the training loop (best-block
//! inclusion, one extrinsic per block, the driver woken when a call is due, uploads open at the quota,
//! both phase changes in one extrinsic): tokens/s 249 vs the baseline's 424 (**0.587**; 0.185 before); the
//! loss equals `baseline+cut` in every epoch; mean epoch 24.5 s; stage-time training 48.9 %, merge
//! 15.1 %, chain wait 6.3 %, idle 29.7 %; last quota → next epoch's first sample 7.4 s on average; 5
//! orchestrator extrinsics per epoch. Runs of the same command differ by a few hundredths with the
//! machine's load (0.634 and chain wait 7.1 % on an earlier run of the same protocol; 0.518, 10.9 % and
//! 9.1 s before the last three changes).
//!
//! ## Measured (2 shared cores, debug build with the math crates at opt-level 3, 30 Nov 2026)
//! `--ffn-dim 1536 --epochs 6` (16 minutes; small, 3 blocks, 9.6 M parameters; stages 3.74 M / 2.17 M / 3.74 M), 6 epochs × 24
//! samples × 256 tokens, u8 wire at width 6; load average 4–15 from other builds and networks:
//! - loss: the pipeline equals `baseline+cut` to 4 decimals in every epoch, with 1 and with 2 miners per
//!   stage (the butterfly mean and the replicated AdamW step are exact); against the uncompressed
//!   `baseline` the ratio is 0.976–1.019 per epoch and **1.003 at the last epoch** (goal ≤ 1.03 met; 6
//!   optimizer steps is a short run, so this says little about long-run cost of the cut).
//! - tokens/s: baseline 602 (2 threads), pipeline 3 × 1 111 (**0.185**), 3 × 2 111 (0.184): goal ≥ 0.8
//!   missed. An epoch took ~55 s: ~21–28 s of training until the stages reached the quota, then ~34 s
//!   from the first stage's quota to the last commit, which is 9 extrinsics (3 phase changes per stage)
//!   that the orchestrator submits one after the other, each waiting ~3.8 s for finality on 1 s blocks.
//!   Even the training part ran at ~0.4 of the baseline: per-sample RPC, S3 and hash work of 3 (or 6)
//!   processes plus the node and the orchestrator on 2 cores that other builds were also using.
//! - `--ffn-dim 1536 --quota 96 --epochs 2 --miners 1 --no-cut-baseline` (load 5–8): epoch 110 s, merge
//!   phases 23 % of stage-time, tokens/s 221 vs 969 (**0.229**), loss ratio 1.013. Here the training part
//!   bounds it: the tail miner (its block plus the 4 096-wide LM head, ~46 % of the model's FLOPs, on one
//!   thread) reported 221–230 tokens/s while the head and middle reported ~440–460.
//! - wire: 60.4 bytes/token against 3 072 uncompressed (bf16, width 384, both directions, 2 cuts):
//!   **50.8x**, not the nominal 128x, because the u8 codec's f32 scale and offset per token (8 bytes)
//!   outweigh the 6 bytes of payload at this width.
//! - The preset's own `ffn_dim` (1 024) stalled at the first merge at the time of writing: the
//!   orchestrator caps a submission's chunk hashes at `chunk_count` of the largest stage, but
//!   `chunk_count` is not monotonic in `P` (the 1.58 M-parameter middle stage lists 771 chunks, the
//!   3.15 M ones 769), so the middle stage's gradient was refused as `Oversize`. `--ffn-dim 1536` puts
//!   every stage in the same chunk-size band.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context};
use clap::Parser;
use iota_devnet::{recut, report, Network, NetworkOptions};
use iota_model::{Encoding, ModelConfig};
use iota_orchestrator::data::{prepare_data, PrepareOptions};
use iota_rpc::types::EpochSummary;
use iota_rpc::{LrSchedule, RunSpec};
use iota_storage::{EmbeddedConfig, EmbeddedS3, ObjectStore};
use tokio::signal::unix::{signal, SignalKind};

#[derive(Parser, Debug, Clone)]
#[command(
	name = "bench-pipeline",
	about = "Pipeline (stages × 1 and × 2 miners, real processes) vs the single-process trainer on the same tokens: tokens/s, loss and wire-byte ratios"
)]
struct Cli {
	/// Model preset (`tiny`, `small`); `--layers` and `--width-ratio` adjust it.
	#[arg(long, default_value = "small")]
	preset: String,
	/// Override the preset's number of blocks (a reduced preset); re-cut into `--stages` balanced by compute.
	#[arg(long, default_value_t = 3)]
	layers: usize,
	/// Override the preset's SwiGLU hidden width.
	#[arg(long)]
	ffn_dim: Option<usize>,
	/// Pipeline stages.
	#[arg(long, default_value_t = 3)]
	stages: usize,
	/// Bottleneck width = d_model / this (64 with the u8 wire is the nominal 128x of docs/design.md §5).
	#[arg(long, default_value_t = 64)]
	width_ratio: usize,
	/// Wire encoding of activations and their gradients (`u8`, `bf16`, `f32`).
	#[arg(long, default_value = "u8")]
	encoding: String,
	/// Codec of merge vectors (`f32` exact, `int8`, `topk:<per mille>`); the single-process baseline
	/// has no merge, so a lossy codec's loss cost shows as the pipeline's gap to it.
	#[arg(long, default_value = "f32")]
	merge_codec: iota_rpc::types::MergeCodec,
	/// Training mode of the pipeline runs: `sync` (one AdamW step per epoch) or
	/// `local[:ACCUMULATE[:OUTER_LR[:MOMENTUM]]]` (inner AdamW steps, outer Nesterov merges).
	#[arg(long, default_value = "sync")]
	training: iota_rpc::types::Training,
	/// Miners per stage of each pipeline run, comma-separated.
	#[arg(long, value_delimiter = ',', default_value = "1,2")]
	miners: Vec<u32>,
	/// Run only the baselines, on data prepared in process (the same `prepare_data` the network runs).
	#[arg(long)]
	baselines_only: bool,
	/// Validators per network (they take CPU from the miners).
	#[arg(long, default_value_t = 0)]
	validators: u32,
	/// Epochs (one optimizer step each).
	#[arg(long, default_value_t = 4)]
	epochs: u32,
	/// Samples (micro-batches) per epoch: the chain's backward quota.
	#[arg(long, default_value_t = 24)]
	quota: u32,
	/// Tokens per row `T`.
	#[arg(long, default_value_t = 64)]
	seq_len: u32,
	/// Rows per micro-batch `B`.
	#[arg(long, default_value_t = 4)]
	batch_rows: u32,
	/// Peak learning rate (warm-up 1 epoch, cosine decay to 10 % over `--epochs`).
	#[arg(long, default_value_t = 3e-3)]
	lr: f32,
	/// Compute threads of the in-process baselines (default: the machine's cores; the pipeline's miners
	/// use one thread each, so both use the whole machine).
	#[arg(long)]
	baseline_threads: Option<usize>,
	/// Skip the `baseline+cut` run (same model through the wire codec in process).
	#[arg(long)]
	no_cut_baseline: bool,
	/// Folder for run folders.
	#[arg(long, default_value = "runs")]
	runs_dir: PathBuf,
	/// Corpus folder (fetched by scripts/fetch-data.sh).
	#[arg(long, default_value = "data/shakespeare")]
	corpus: PathBuf,
	/// A tokenizer.json to use instead of training one per network (default: `data/tokenizer-<vocab>.json`
	/// when it exists).
	#[arg(long)]
	tokenizer: Option<PathBuf>,
	/// Folder with the iota-* binaries (default: this binary's folder).
	#[arg(long)]
	bin_dir: Option<PathBuf>,
	/// Keep every object a network wrote. By default, once a network has stopped, the miners' objects
	/// (activations, gradient submissions, reduced shards and stage checkpoints with AdamW moments: about
	/// 160 MB per epoch for the default model) are deleted from its bucket folder; the data shards, the run
	/// spec, pathway logs and process logs stay.
	#[arg(long)]
	keep_objects: bool,
	/// Give up on a network that has not finished its epochs after this many minutes.
	#[arg(long, default_value_t = 20)]
	timeout_mins: u64,
}

impl Cli {
	/// The benchmarked model as the flags describe it ([`bench_model`]).
	fn model(&self) -> anyhow::Result<ModelConfig> {
		bench_model(
			&self.preset,
			self.layers,
			self.ffn_dim,
			self.stages,
			self.width_ratio,
			self.seq_len as usize,
		)
	}
}

/// The model of the bench: `preset` with `layers` blocks (and SwiGLU width `ffn_dim`, if given),
/// bottleneck width `d_model / width_ratio`, re-cut into `stages` balanced by compute at `seq_len`
/// tokens per row ([`recut`]; with as many stages as blocks there is one cut only).
///
/// # Errors
/// An unknown preset, a ratio that is 0 or does not divide `d_model`, more stages than blocks, or a config
/// that does not validate.
fn bench_model(
	preset: &str,
	layers: usize,
	ffn_dim: Option<usize>,
	stages: usize,
	width_ratio: usize,
	seq_len: usize,
) -> anyhow::Result<ModelConfig> {
	let mut m = ModelConfig::preset(preset).map_err(|e| anyhow::anyhow!("{e}"))?;
	ensure!(layers > 0, "--layers must be > 0");
	m.n_layers = layers;
	if let Some(f) = ffn_dim {
		ensure!(f > 0, "--ffn-dim must be > 0");
		m.ffn_dim = f;
	}
	ensure!(
		width_ratio > 0 && m.d_model.is_multiple_of(width_ratio),
		"--width-ratio {width_ratio} must divide d_model {} (bottleneck width = d_model / ratio)",
		m.d_model
	);
	let width = m.d_model / width_ratio;
	let m = m.with_bottleneck(Some(width));
	let Some(m) = recut(m, stages, seq_len) else {
		bail!("--stages {stages} does not fit {layers} blocks (1..={layers})")
	};
	m.validate().map_err(|e| anyhow::anyhow!("{e}"))?;
	Ok(m)
}

/// One micro-batch: inputs and targets `[B, T]` u32.
use iota_devnet::baseline::Sample;

/// Samples `0..n` of `spec` (docs/design.md §3 step 2: inputs = row[0..T], targets = row[1..T+1]), read from the
/// embedded bucket's folder `bucket_dir` (`<root>/<bucket>`, where the object key is the relative path);
/// every shard is checked against the spec's BLAKE3 and decoded with the vocabulary check.
///
/// # Errors
/// A missing or unreadable shard file, a hash mismatch, a shard of the wrong size or with tokens outside the
/// vocabulary, an empty manifest.
fn load_samples(spec: &RunSpec, bucket_dir: &Path, n: u64) -> anyhow::Result<Vec<Sample>> {
	iota_devnet::baseline::samples_from(spec, 0..n, &mut |obj| {
		let path = bucket_dir.join(&obj.key);
		std::fs::read(&path).with_context(|| path.display().to_string())
	})
}

/// What one run measured, per epoch and in total.
#[derive(Clone, Debug)]
struct RunResult {
	/// `baseline`, `baseline+cut`, `pipeline 3x1`, ...
	name: String,
	/// Mean training loss of each epoch's samples (nats), epoch 0 first.
	losses: Vec<f32>,
	/// Tokens trained.
	tokens: u64,
	/// Seconds of training (see the module docs for what each kind includes).
	train_secs: f64,
	/// Wire bytes (activations + gradients), when anything crossed a wire.
	wire_bytes: u64,
	/// Pipelines: start-up seconds (node, data, processes) before the first epoch; share of stage-time
	/// in merge phases; mean epoch wall seconds; samples per epoch as the orchestrator counted them.
	startup_secs: Option<f64>,
	overhead_share: Option<f64>,
	epoch_secs: Vec<f64>,
	samples: Vec<u32>,
	/// Pipelines: stage-time by what it was spent on, the last quota → next first sample (mean, max
	/// seconds) and the orchestrator's extrinsics per epoch.
	split: Option<iota_rpc::types::TimeSplit>,
	quota_to_start: Option<(f64, f64)>,
	extrinsics: Vec<u32>,
	/// Baselines: optimizer steps taken.
	optimizer_steps: Option<u64>,
	/// Pipelines: miners per stage.
	miners: Option<u32>,
	/// 1-minute load average before and after the run.
	load_before: f64,
	load_after: f64,
	/// Pipelines: the machine's CPU by role from the end of the network's start-up to its last epoch
	/// ([`report::CpuUse`]).
	cpu: Option<report::CpuUse>,
}

impl RunResult {
	fn to_json(&self) -> serde_json::Value {
		serde_json::json!({
			"name": self.name, "losses": self.losses, "tokens": self.tokens, "train_secs": self.train_secs,
			"tokens_per_sec": self.tokens_per_sec(), "wire_bytes": self.wire_bytes, "startup_secs": self.startup_secs,
			"overhead_share": self.overhead_share, "epoch_secs": self.epoch_secs, "samples": self.samples,
			"time_split_ms": self.split.map(|t| serde_json::json!({
				"training": t.training_ms, "merge": t.merge_ms, "chain_wait": t.chain_wait_ms, "idle": t.idle_ms,
			})),
			"quota_to_start_secs": self.quota_to_start.map(|(mean, max)| serde_json::json!({"mean": mean, "max": max})),
			"extrinsics": self.extrinsics, "optimizer_steps": self.optimizer_steps,
			"load_before": self.load_before, "load_after": self.load_after,
			"cpu_secs_by_role": self.cpu.as_ref().map(|c| serde_json::json!({
				"cores": c.cores, "secs": c.secs, "by_role": c.by_role,
			})),
		})
	}

	fn tokens_per_sec(&self) -> f64 {
		if self.train_secs > 0.0 {
			self.tokens as f64 / self.train_secs
		} else {
			0.0
		}
	}
}

/// The 1-minute load average (0 where `/proc/loadavg` cannot be read).
fn load_avg() -> f64 {
	std::fs::read_to_string("/proc/loadavg")
		.ok()
		.and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
		.unwrap_or(0.0)
}

/// Tokens per second of a pipeline over its completed epochs: `Σ tokens / (last completed − first
/// started)`. `None` without epochs or with a zero span.
fn pipeline_span_secs(epochs: &[EpochSummary]) -> Option<f64> {
	let (first, last) = (epochs.first()?, epochs.last()?);
	let ms = last.completed_ms.checked_sub(first.started_ms)?;
	(ms > 0).then_some(ms as f64 / 1000.0)
}

/// `a / b` for per-epoch losses of equal index; shorter of the two lengths.
fn ratios(a: &[f32], b: &[f32]) -> Vec<f64> {
	a.iter().zip(b).map(|(x, y)| f64::from(*x) / f64::from(*y)).collect()
}

/// Bytes per token of the uncompressed wire: bf16 activations of width `d_model`, forward and backward,
/// across `stages − 1` cuts.
fn uncompressed_bytes_per_token(d_model: usize, stages: usize) -> f64 {
	(2 * 2 * d_model * stages.saturating_sub(1)) as f64
}

/// Element-payload compression of the wire vs bf16 at `d_model`: width ratio × (2 bytes / element bytes).
fn nominal_compression(model: &ModelConfig, enc: Encoding) -> f64 {
	model.width_ratio() * 2.0 / enc.bytes_per_element() as f64
}

/// Runs the single-process baseline ([`iota_devnet::baseline::train`]: the spec's optimizer, a step
/// every `accumulate` samples in local mode) over `samples` (E·Q of them) from the seed's weights, timed.
///
/// # Errors
/// As [`iota_devnet::baseline::train`].
fn run_baseline(
	name: &str,
	spec: &RunSpec,
	model: &ModelConfig,
	wire: Option<Encoding>,
	samples: &[Sample],
	quota: usize,
) -> anyhow::Result<RunResult> {
	let load_before = load_avg();
	let started = Instant::now();
	let inputs = iota_devnet::baseline::Inputs { init: &[], samples, quota, heldout: None };
	let b = iota_devnet::baseline::train(spec, model, wire, inputs, &|| {
		INTERRUPTED.load(Ordering::Relaxed)
	})
	.with_context(|| format!("baseline {name}"))?;
	let train_secs = started.elapsed().as_secs_f64();
	let (losses, epoch_secs, steps, wire_bytes) = (b.losses, b.epoch_secs, b.steps, b.wire_bytes);
	Ok(RunResult {
		name: name.into(),
		losses,
		tokens: samples.len() as u64 * spec.tokens_per_sample(),
		train_secs,
		wire_bytes,
		startup_secs: None,
		overhead_share: None,
		split: None,
		quota_to_start: None,
		extrinsics: Vec::new(),
		epoch_secs,
		samples: vec![quota as u32; samples.len() / quota],
		optimizer_steps: Some(steps),
		miners: None,
		load_before,
		load_after: load_avg(),
		cpu: None,
	})
}

/// Merge bytes per trained token of a `miners`-per-stage network: every replica of every stage submits
/// one merge vector per epoch (`iota_protocol::chunks::submission_len` of the stage's `P` in the run's
/// codec; the butterfly's shard traffic scales with it), over the epoch's `quota` samples. Also the same
/// for a sync-mode network with f32 vectors that takes as many optimizer steps per token (a merge every
/// `accumulate` samples in local mode, every epoch in sync mode).
///
/// # Errors
/// The model's stage sizes cannot be computed.
fn merge_bytes_per_token(spec: &RunSpec, miners: u32, quota: u32) -> anyhow::Result<(f64, f64)> {
	let mut per_epoch = 0u64;
	let mut sync_f32 = 0u64;
	for s in 0..spec.model.n_stages() {
		let p = spec.model.stage_param_count(s)? as u64;
		per_epoch += u64::from(miners) * iota_protocol::chunks::submission_len(spec.merge_codec, p);
		sync_f32 += u64::from(miners) * 4 * p;
	}
	let tokens = f64::from(quota) * spec.tokens_per_sample() as f64;
	let merges_per_epoch =
		f64::from(quota) / f64::from(spec.training.accumulate().unwrap_or(quota));
	Ok((per_epoch as f64 / tokens, sync_f32 as f64 * merges_per_epoch / tokens))
}

/// The network's options for this bench (the devnet's choices, with the bench's model and sizes).
fn network_options(
	cli: &Cli,
	model: &ModelConfig,
	run_id: &str,
	run_dir: &Path,
	bin_dir: &Path,
	miners: u32,
) -> NetworkOptions {
	let mut o = NetworkOptions::new(run_id, run_dir, bin_dir, &cli.corpus, model.clone());
	o.miners_per_stage = miners;
	o.validators = cli.validators;
	o.quota = cli.quota;
	o.log_filter = "info".into();
	prepare_options(cli, &mut o.data);
	o
}

/// Data and optimizer options shared by every run of the bench.
fn prepare_options(cli: &Cli, d: &mut PrepareOptions) {
	d.seq_len = cli.seq_len;
	d.batch_rows = cli.batch_rows;
	d.rows_per_shard = cli.batch_rows * 64;
	d.encoding = cli.encoding.clone();
	d.merge_codec = cli.merge_codec;
	d.training = cli.training;
	d.adamw.lr = cli.lr;
	d.lr = LrSchedule {
		peak: cli.lr,
		warmup_epochs: 1,
		total_epochs: cli.epochs.max(1),
		min_ratio: 0.1,
	};
	d.tokenizer = cli.tokenizer.clone().or_else(|| {
		let p = PathBuf::from(format!("data/tokenizer-{}.json", d.model.vocab_size));
		p.exists().then_some(p)
	});
}

/// The run id of a pipeline run: `bp<MMddHHmmss>-<stages>x<miners>`. Short on purpose: object keys on
/// chain are bounded (`MaxKeyLen`, 128 bytes in the dev runtime) and the longest the merge commits, a
/// reduced shard's, is the run id plus 105 bytes.
fn run_id(stamp: &str, stages: usize, miners: u32) -> String {
	format!("bp{stamp}-{stages}x{miners}")
}

/// Starts a network, waits for `cli.epochs` completed epochs, stops it. Returns the result, the run spec
/// and the embedded bucket's folder.
async fn run_pipeline(
	cli: &Cli,
	model: &ModelConfig,
	miners: u32,
	stamp: &str,
	bench_dir: &Path,
	bin_dir: &Path,
) -> anyhow::Result<(RunResult, RunSpec, PathBuf)> {
	let name = format!("pipeline {}x{miners}", cli.stages);
	let run_id = run_id(stamp, cli.stages, miners);
	let run_dir = bench_dir.join(format!("{}x{miners}", cli.stages));
	std::fs::create_dir_all(&run_dir)?;
	let opts = network_options(cli, model, &run_id, &run_dir, bin_dir, miners);
	let load_before = load_avg();
	let started = Instant::now();
	println!("{name}: starting the network (logs in {}/logs) ...", run_dir.display());
	let mut net = tokio::select! {
		n = Network::start(opts) => n.with_context(|| format!("starting the network of {name}"))?,
		_ = interrupted() => bail!("interrupted while starting the network of {name} (its processes are stopped)"),
	};
	let cpu_start = net.cpu_reading();
	let deadline = started + Duration::from_secs(cli.timeout_mins * 60);
	let mut printed = 0usize;
	let epochs = loop {
		tokio::time::sleep(Duration::from_secs(1)).await;
		if INTERRUPTED.load(Ordering::Relaxed) {
			bail!("interrupted during {name} (its processes are stopped)");
		}
		let (_, _, dead) = net.liveness();
		if !dead.is_empty() {
			let tail = net.orchestrator.log_tail(20);
			bail!(
				"{name}: {dead:?} exited; orchestrator log tail:\n{tail}\n(logs in {}/logs)",
				run_dir.display()
			);
		}
		let st = match net.status().await {
			Ok(st) => st,
			Err(e) => {
				tracing::warn!("orchestrator status: {e}");
				continue;
			},
		};
		for e in st.epochs.iter().skip(printed) {
			println!(
				"  {name}: epoch {} loss {:.4}, {} samples, {:.1} s (merge phases {:.1} stage-s)",
				e.epoch,
				e.loss,
				e.samples,
				e.completed_ms.saturating_sub(e.started_ms) as f64 / 1000.0,
				e.merge_ms as f64 / 1000.0
			);
		}
		printed = st.epochs.len();
		if st.epochs.len() >= cli.epochs as usize {
			break st.epochs;
		}
		if Instant::now() > deadline {
			bail!(
				"{name}: {} of {} epochs after {} minutes (logs in {}/logs)",
				st.epochs.len(),
				cli.epochs,
				cli.timeout_mins,
				run_dir.display()
			);
		}
	};
	let cpu = report::CpuUse::between(&cpu_start, &net.cpu_reading());
	let spec = net.prepared.spec.clone();
	net.stop();
	let bucket_dir = run_dir.join("s3").join(EmbeddedConfig::new(".").bucket);
	if !cli.keep_objects {
		let freed = prune_miner_objects(&bucket_dir, &run_id)?;
		println!(
			"  {name}: deleted {:.0} MB of miner objects (--keep-objects keeps them)",
			freed as f64 / 1e6
		);
	}
	let load_after = load_avg();
	let epochs: Vec<EpochSummary> = epochs.into_iter().take(cli.epochs as usize).collect();
	for (i, e) in epochs.iter().enumerate() {
		ensure!(
			e.epoch == i as u32,
			"{name}: epoch summaries out of order ({} at index {i})",
			e.epoch
		);
	}
	let startup_secs =
		epochs.first().map(|e| (e.started_ms as f64 / 1000.0) - unix_secs_at(started));
	let result = RunResult {
		name,
		losses: epochs.iter().map(|e| e.loss).collect(),
		tokens: epochs.iter().map(|e| e.tokens).sum(),
		train_secs: pipeline_span_secs(&epochs).unwrap_or(0.0),
		wire_bytes: epochs.iter().map(|e| e.wire_bytes).sum(),
		startup_secs,
		overhead_share: report::overhead_share(&epochs, cli.stages as u32),
		epoch_secs: epochs
			.iter()
			.map(|e| e.completed_ms.saturating_sub(e.started_ms) as f64 / 1000.0)
			.collect(),
		samples: epochs.iter().map(|e| e.samples).collect(),
		split: iota_rpc::types::TimeSplit::of(epochs.iter().flat_map(|e| &e.stages)),
		quota_to_start: report::quota_to_start_secs(&epochs),
		extrinsics: epochs.iter().map(|e| e.extrinsics).collect(),
		optimizer_steps: None,
		miners: Some(miners),
		load_before,
		load_after,
		cpu: Some(cpu),
	};
	Ok((result, spec, bucket_dir))
}

/// Deletes the folder of every miner's objects of `run` (`keys::run_scope(run) + "miners/"`) under the
/// embedded bucket's folder; returns the bytes freed.
///
/// # Errors
/// A bad run id; I/O errors other than a missing folder.
fn prune_miner_objects(bucket_dir: &Path, run: &str) -> anyhow::Result<u64> {
	let run = iota_storage::keys::Id::new(run.to_owned())
		.map_err(|e| anyhow::anyhow!("run id {run:?}: {e}"))?;
	let dir = bucket_dir.join(iota_storage::keys::run_scope(&run)).join("miners");
	fn size(p: &Path) -> std::io::Result<u64> {
		let m = std::fs::symlink_metadata(p)?;
		if !m.is_dir() {
			return Ok(m.len());
		}
		std::fs::read_dir(p)?.try_fold(0, |acc, e| Ok(acc + size(&e?.path())?))
	}
	match size(&dir) {
		Ok(bytes) => {
			std::fs::remove_dir_all(&dir).with_context(|| format!("deleting {}", dir.display()))?;
			Ok(bytes)
		},
		Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
		Err(e) => Err(e).with_context(|| format!("sizing {}", dir.display())),
	}
}

/// Unix seconds at an `Instant` in the past.
fn unix_secs_at(t: Instant) -> f64 {
	let now = std::time::SystemTime::now()
		.duration_since(std::time::UNIX_EPOCH)
		.unwrap_or_default()
		.as_secs_f64();
	now - t.elapsed().as_secs_f64()
}

/// The spec fields that decide what is trained (everything but the run id and the object keys).
fn same_training(a: &RunSpec, b: &RunSpec) -> bool {
	let hashes = |s: &RunSpec| s.data.shards.iter().map(|o| o.hash).collect::<Vec<_>>();
	a.model == b.model
		&& a.seed == b.seed
		&& a.encoding == b.encoding
		&& a.merge_codec == b.merge_codec
		&& a.training == b.training
		&& a.adamw == b.adamw
		&& a.lr == b.lr
		&& a.max_norm == b.max_norm
		&& (a.data.seq_len, a.data.batch_rows, a.data.rows_per_shard)
			== (b.data.seq_len, b.data.batch_rows, b.data.rows_per_shard)
		&& hashes(a) == hashes(b)
}

/// Data prepared in process (the same code the network runs), for a baselines-only run.
async fn prepare_only(
	cli: &Cli,
	model: &ModelConfig,
	stamp: &str,
	bench_dir: &Path,
) -> anyhow::Result<(RunSpec, PathBuf)> {
	let root = bench_dir.join("data");
	let cfg = EmbeddedConfig::new(&root);
	let bucket_dir = root.join(&cfg.bucket);
	let server = EmbeddedS3::start(cfg).await.context("starting the embedded S3 server")?;
	let store = ObjectStore::connect(server.store_config())
		.await
		.context("connecting to the embedded S3 server")?;
	let mut opts = PrepareOptions::new(format!("bench-{stamp}"), &cli.corpus, model.clone());
	prepare_options(cli, &mut opts);
	let prepared = prepare_data(&store, &opts).await;
	server.shutdown().await;
	Ok((prepared.context("preparing the run data")?.spec, bucket_dir))
}

fn fmt_ratio(r: Option<f64>) -> String {
	r.map_or_else(|| "—".into(), |r| format!("{r:.3}"))
}

/// Set by SIGINT or SIGTERM: the bench stops the running network (dropping it stops every process) or
/// the running baseline, and exits with an error.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Sets [`INTERRUPTED`] on the first SIGINT or SIGTERM.
fn watch_signals() -> anyhow::Result<()> {
	let mut int = signal(SignalKind::interrupt())?;
	let mut term = signal(SignalKind::terminate())?;
	tokio::spawn(async move {
		tokio::select! {
			_ = int.recv() => {},
			_ = term.recv() => {},
		}
		INTERRUPTED.store(true, Ordering::Relaxed);
	});
	Ok(())
}

/// Resolves once [`INTERRUPTED`] is set.
async fn interrupted() {
	while !INTERRUPTED.load(Ordering::Relaxed) {
		tokio::time::sleep(Duration::from_millis(200)).await;
	}
}

fn main() -> anyhow::Result<()> {
	let cli = Cli::parse();
	// Before any thread exists: candle reads RAYON_NUM_THREADS for its CPU kernels.
	let threads = cli
		.baseline_threads
		.unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1));
	ensure!(threads > 0, "--baseline-threads must be > 0");
	std::env::set_var("RAYON_NUM_THREADS", threads.to_string());
	tracing_subscriber::fmt()
		.with_env_filter(
			tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
		)
		.init();
	tokio::runtime::Builder::new_multi_thread()
		.worker_threads(2)
		.enable_all()
		.build()?
		.block_on(async {
			watch_signals()?;
			bench(cli, threads).await
		})
}

async fn bench(cli: Cli, threads: usize) -> anyhow::Result<()> {
	ensure!(cli.epochs > 0 && cli.quota > 0, "--epochs and --quota must be > 0");
	ensure!(cli.miners.iter().all(|&m| m > 0), "--miners: every entry must be > 0");
	let enc = Encoding::parse(&cli.encoding).map_err(|e| anyhow::anyhow!("{e}"))?;
	let model = cli.model()?;
	let bin_dir = match &cli.bin_dir {
		Some(d) => d.clone(),
		None => std::env::current_exe()?.parent().context("binary folder")?.to_path_buf(),
	};
	let stamp = chrono::Utc::now().format("%m%d%H%M%S").to_string();
	let bench_dir = cli.runs_dir.join(format!("bench-{stamp}"));
	std::fs::create_dir_all(&bench_dir)?;
	let bench_dir = bench_dir.canonicalize()?;
	let tokens_per_sample = u64::from(cli.seq_len) * u64::from(cli.batch_rows);
	let n_samples = u64::from(cli.epochs) * u64::from(cli.quota);
	println!("bench-pipeline in {}", bench_dir.display());
	println!(
		"  model: {} with {} blocks re-cut into {} stages, d_model {}, {} parameters; bottleneck width {} (d_model/{}), \
		 wire {} → nominal {:.0}x vs bf16 at d_model",
		cli.preset,
		model.n_layers,
		model.n_stages(),
		model.d_model,
		model.total_param_count()?,
		model.wire_width(),
		cli.width_ratio,
		enc.as_str(),
		nominal_compression(&model, enc)
	);
	let stage_params: Vec<usize> = (0..model.n_stages())
		.map(|i| model.stage_param_count(i))
		.collect::<Result<_, _>>()
		.map_err(|e| anyhow::anyhow!("{e}"))?;
	println!("  ffn_dim {}, parameters per stage {stage_params:?}", model.ffn_dim);
	println!(
		"  {} epochs × {} samples × {} tokens ({} × {}) = {} tokens per run; miners 1 thread each, baselines {threads} threads; \
		 load average now {:.2}",
		cli.epochs,
		cli.quota,
		tokens_per_sample,
		cli.batch_rows,
		cli.seq_len,
		n_samples * tokens_per_sample,
		load_avg()
	);

	// 1. Pipelines.
	let mut runs: Vec<RunResult> = Vec::new();
	let mut data: Option<(RunSpec, PathBuf)> = None;
	let miners: &[u32] = if cli.baselines_only { &[] } else { &cli.miners };
	for &m in miners {
		let (r, spec, bucket) = run_pipeline(&cli, &model, m, &stamp, &bench_dir, &bin_dir).await?;
		if let Some((first, _)) = &data {
			ensure!(
				same_training(first, &spec),
				"the networks' run specs differ in what they train"
			);
		} else {
			data = Some((spec, bucket));
		}
		if r.samples.iter().any(|&s| s != cli.quota) {
			println!(
				"  ! {}: samples per epoch {:?}, not the quota {}",
				r.name, r.samples, cli.quota
			);
		}
		runs.push(r);
	}
	let (spec, bucket_dir) = match data {
		Some(d) => d,
		None => prepare_only(&cli, &model, &stamp, &bench_dir).await?,
	};

	// 2. Baselines on the same samples, in the same order.
	let samples = load_samples(&spec, &bucket_dir, n_samples)?;
	let quota = cli.quota as usize;
	println!(
		"baseline: {} samples loaded from {} (hash-checked); training ...",
		samples.len(),
		bucket_dir.display()
	);
	let mut baselines = vec![run_baseline(
		"baseline",
		&spec,
		&spec.model.clone().with_bottleneck(None),
		None,
		&samples,
		quota,
	)?];
	if !cli.no_cut_baseline {
		println!("baseline+cut: training ...");
		baselines.push(run_baseline(
			"baseline+cut",
			&spec,
			&spec.model,
			Some(spec.wire_encoding()?),
			&samples,
			quota,
		)?);
	}

	// 3. Report.
	let base = &baselines[0];
	let cut = baselines.get(1);
	let all: Vec<&RunResult> = baselines.iter().chain(runs.iter()).collect();
	println!();
	println!("| run | tokens | train s | tokens/s | tokens/s vs baseline | last-epoch loss | loss vs baseline (last epoch) | loss vs baseline+cut | load avg before → after |");
	println!("|---|---:|---:|---:|---:|---:|---:|---:|---|");
	for r in &all {
		let last = r.losses.last().copied().unwrap_or(f32::NAN);
		let vs = |b: &RunResult| b.losses.last().map(|l| f64::from(last) / f64::from(*l));
		println!(
			"| {} | {} | {:.1} | {:.0} | {:.3} | {:.4} | {} | {} | {:.2} → {:.2} |",
			r.name,
			r.tokens,
			r.train_secs,
			r.tokens_per_sec(),
			r.tokens_per_sec() / base.tokens_per_sec(),
			last,
			fmt_ratio(vs(base)),
			fmt_ratio(cut.and_then(vs)),
			r.load_before,
			r.load_after
		);
	}
	println!();
	let mut header = String::from("| epoch | lr |");
	let mut rule = String::from("|---:|---:|");
	for r in &all {
		header.push_str(&format!(" {} |", r.name));
		rule.push_str("---:|");
	}
	for r in &runs {
		header.push_str(&format!(" {} / baseline |", r.name));
		rule.push_str("---:|");
		if cut.is_some() {
			header.push_str(&format!(" {} / baseline+cut |", r.name));
			rule.push_str("---:|");
		}
	}
	println!("{header}\n{rule}");
	for e in 0..cli.epochs as usize {
		let mut line = format!("| {e} | {:.2e} |", spec.lr.lr(e as u32));
		for r in &all {
			line.push_str(&r.losses.get(e).map_or(" — |".into(), |l| format!(" {l:.4} |")));
		}
		for r in &runs {
			line.push_str(&format!(
				" {} |",
				fmt_ratio(ratios(&r.losses, &base.losses).get(e).copied())
			));
			if let Some(c) = cut {
				line.push_str(&format!(
					" {} |",
					fmt_ratio(ratios(&r.losses, &c.losses).get(e).copied())
				));
			}
		}
		println!("{line}");
	}
	println!();
	let raw = uncompressed_bytes_per_token(model.d_model, model.n_stages());
	println!(
		"wire: uncompressed (bf16, width {}, forward + backward, {} cuts) = {raw:.0} bytes/token; nominal payload ratio {:.0}x \
		 ({}x width × {}x element)",
		model.d_model,
		model.n_stages() - 1,
		nominal_compression(&model, enc),
		model.width_ratio(),
		2.0 / enc.bytes_per_element() as f64
	);
	for r in runs.iter().chain(cut) {
		if r.tokens > 0 && r.wire_bytes > 0 {
			let per_token = r.wire_bytes as f64 / r.tokens as f64;
			println!(
				"  {}: {per_token:.1} bytes/token on the wire → {:.1}x smaller than uncompressed",
				r.name,
				raw / per_token
			);
		}
	}
	for r in &runs {
		let Some(miners) = r.miners else { continue };
		let (bytes, sync) = merge_bytes_per_token(&spec, miners, cli.quota)?;
		println!(
			"  {}: merge {bytes:.0} bytes/token ({} vectors, a merge every {} samples) vs {sync:.0} for sync mode \
			 with f32 at the same optimizer steps per token: {:.1}x less",
			r.name,
			spec.merge_codec,
			cli.quota,
			sync / bytes
		);
	}
	for b in &baselines {
		if let Some(n) = b.optimizer_steps {
			println!("  {}: {n} optimizer steps ({})", b.name, spec.training);
		}
	}
	println!();
	for r in &runs {
		let mean_epoch = r.epoch_secs.iter().sum::<f64>() / r.epoch_secs.len().max(1) as f64;
		println!(
			"{}: start-up {:.0} s (excluded), mean epoch {mean_epoch:.1} s, stage-time in merge phases (gradient upload, \
			 butterfly, step, chain blocks) {:.1} %",
			r.name,
			r.startup_secs.unwrap_or(0.0),
			r.overhead_share.unwrap_or(0.0) * 100.0
		);
		if let Some(t) = r.split {
			println!(
				"  stage-time: {}; chain wait {:.1} % (goal ≤ 5 %: {})",
				t.shares(),
				t.share(t.chain_wait_ms) * 100.0,
				if t.share(t.chain_wait_ms) <= 0.05 { "met" } else { "missed" }
			);
		}
		if let Some(c) = &r.cpu {
			println!(
				"  CPU of the machine ({} cores × {:.0} s, from /proc): {} (the orchestrator's with its embedded S3 server)",
				c.cores,
				c.secs,
				c.summary()
			);
		}
		if let Some((mean, max)) = r.quota_to_start {
			println!(
				"  last stage's quota → next epoch's first sample: mean {mean:.1} s, max {max:.1} s; \
				 orchestrator extrinsics per epoch {:?}",
				r.extrinsics
			);
		}
	}
	if let Some(r) = runs.first() {
		let tps = r.tokens_per_sec() / base.tokens_per_sec();
		let loss = ratios(&r.losses, &base.losses).last().copied();
		println!(
			"goals for {}: tokens/s ratio {tps:.3} (goal ≥ 0.8: {}); last-epoch loss ratio {} (goal ≤ 1.03 at {:.0}x: {})",
			r.name,
			if tps >= 0.8 { "met" } else { "missed" },
			fmt_ratio(loss),
			nominal_compression(&model, enc),
			match loss {
				Some(l) if l <= 1.03 => "met",
				Some(_) => "missed",
				None => "not measured",
			}
		);
	}
	let json = serde_json::json!({
		"model": model, "stages": cli.stages, "width_ratio": cli.width_ratio, "encoding": cli.encoding, "merge_codec": cli.merge_codec.to_string(), "training": cli.training.to_string(),
		"epochs": cli.epochs, "quota": cli.quota, "seq_len": cli.seq_len, "batch_rows": cli.batch_rows, "lr": cli.lr,
		"baseline_threads": threads, "uncompressed_bytes_per_token": raw,
		"nominal_compression": nominal_compression(&model, enc),
		"runs": all.iter().map(|r| r.to_json()).collect::<Vec<_>>(),
	});
	let path = bench_dir.join("bench.json");
	std::fs::write(&path, serde_json::to_string_pretty(&json)?)?;
	println!("numbers: {}", path.display());
	Ok(())
}

#[cfg(test)]
mod tests {
	use super::*;

	#[test]
	fn model_and_ratios() {
		let m = bench_model("small", 3, None, 3, 64, 256).unwrap();
		assert_eq!(
			(m.wire_width(), m.n_stages(), m.stages.clone()),
			(6, 3, vec![[0, 1], [1, 2], [2, 3]])
		);
		assert_eq!(nominal_compression(&m, Encoding::U8), 128.0);
		assert_eq!(nominal_compression(&m, Encoding::Bf16), 64.0);
		assert_eq!(uncompressed_bytes_per_token(384, 3), 3072.0);
		assert!(
			bench_model("small", 3, None, 3, 7, 256).is_err(),
			"a ratio that does not divide d_model"
		);
		assert!(bench_model("small", 3, None, 3, 0, 256).is_err());
		assert!(bench_model("small", 2, None, 3, 64, 256).is_err(), "more stages than blocks");
		assert!(bench_model("small", 0, None, 1, 64, 256).is_err());
		assert!(bench_model("huge", 3, None, 3, 64, 256).is_err());
		assert_eq!(bench_model("small", 3, Some(1536), 3, 64, 256).unwrap().ffn_dim, 1536);
		assert!(bench_model("small", 3, Some(0), 3, 64, 256).is_err());
		// The longest key a merge commits on chain fits the dev runtime's 128-byte bound.
		let run = iota_storage::keys::Id::new(run_id("1130093517", 3, 2)).unwrap();
		let miner = iota_storage::keys::Id::new(
			"5HGjWAeFDfFCWPsjFQdVV2Msvz2XtMktvgocEZcCj68kUMaw".to_owned(),
		)
		.unwrap();
		assert!(
			iota_storage::keys::reduced_shard(&run, 99_999_999, 999, 999_999, &miner).len() <= 128
		);
		assert_eq!(ratios(&[2.0, 3.0], &[1.0, 2.0, 5.0]), vec![2.0, 1.5]);
		let e = |epoch, started_ms, completed_ms| EpochSummary {
			epoch,
			loss: 1.0,
			samples: 1,
			tokens: 10,
			tokens_cumulative: 0,
			wire_bytes: 0,
			started_ms,
			completed_ms,
			merge_ms: 0,
			stages: vec![],
			quota_to_start_ms: None,
			extrinsics: 0,
			heldout_loss: None,
			recomputed: 0,
			lost: 0,
		};
		assert_eq!(pipeline_span_secs(&[e(0, 1_000, 2_000), e(1, 2_500, 4_000)]), Some(3.0));
		assert_eq!(pipeline_span_secs(&[]), None);
		assert_eq!(pipeline_span_secs(&[e(0, 2_000, 1_000)]), None);
	}

	#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
	async fn samples_are_read_hash_checked_and_baseline_trains() {
		let dir = tempfile::tempdir().unwrap();
		let corpus = dir.path().join("corpus");
		std::fs::create_dir_all(&corpus).unwrap();
		let text =
			"Shall I compare thee to a summer's day? Thou art more lovely and more temperate. "
				.repeat(60);
		std::fs::write(corpus.join("a.txt"), &text).unwrap();
		let cli = Cli::parse_from([
			"bench-pipeline",
			"--preset",
			"tiny",
			"--layers",
			"3",
			"--width-ratio",
			"8",
			"--epochs",
			"2",
			"--quota",
			"2",
			"--seq-len",
			"8",
			"--batch-rows",
			"2",
			"--baselines-only",
			"--corpus",
			corpus.to_str().unwrap(),
		]);
		assert!(cli.baselines_only && cli.miners == [1, 2]);
		let model = cli.model().unwrap();
		let mut opts = PrepareOptions::new("t", &cli.corpus, model.clone());
		prepare_options(&cli, &mut opts);
		assert_eq!(opts.lr.total_epochs, 2);
		opts.tokenizer = None;
		opts.vocab_size = 300;
		let root = dir.path().join("s3");
		let server = EmbeddedS3::start(EmbeddedConfig::new(&root)).await.unwrap();
		let store = ObjectStore::connect(server.store_config()).await.unwrap();
		let spec = prepare_data(&store, &opts).await.unwrap().spec;
		server.shutdown().await;
		let bucket = root.join("iota");

		let samples = load_samples(&spec, &bucket, 4).unwrap();
		assert_eq!(samples.len(), 4);
		assert_eq!(samples[0].0.dims(), &[2, 8]);
		// Targets are the inputs shifted by one token.
		let (x, y) =
			(samples[1].0.to_vec2::<u32>().unwrap(), samples[1].1.to_vec2::<u32>().unwrap());
		assert_eq!(x[0][1..], y[0][..7]);

		let r = run_baseline("b", &spec, &model, Some(Encoding::U8), &samples, 2).unwrap();
		assert_eq!((r.losses.len(), r.tokens), (2, 4 * 16));
		assert!(r.losses.iter().all(|l| l.is_finite() && *l > 0.0) && r.wire_bytes > 0);
		assert!(
			run_baseline("b", &spec, &model, None, &samples, 3).is_err(),
			"4 samples are not epochs of 3"
		);

		// Pruning removes only the miners' objects of that run.
		let miner_obj = bucket.join("v1/runs/t/miners/5Abc/epochs/00000000/stages/000/checkpoint");
		std::fs::create_dir_all(miner_obj.parent().unwrap()).unwrap();
		std::fs::write(&miner_obj, [0u8; 1000]).unwrap();
		assert_eq!(prune_miner_objects(&bucket, "t").unwrap(), 1000);
		assert!(!bucket.join("v1/runs/t/miners").exists());
		assert_eq!(prune_miner_objects(&bucket, "t").unwrap(), 0, "nothing left to delete");
		assert!(prune_miner_objects(&bucket, "../t").is_err(), "a run id that escapes the bucket");
		assert_eq!(load_samples(&spec, &bucket, 4).unwrap().len(), 4, "data shards stay");

		// A shard whose bytes changed is refused.
		let key = &spec.data.shards[0].key;
		let mut bytes = std::fs::read(bucket.join(key)).unwrap();
		bytes[0] ^= 1;
		std::fs::write(bucket.join(key), &bytes).unwrap();
		let err = load_samples(&spec, &bucket, 1).unwrap_err().to_string();
		assert!(err.contains("BLAKE3"), "{err}");
		std::fs::remove_file(bucket.join(key)).unwrap();
		assert!(load_samples(&spec, &bucket, 1).is_err(), "a missing shard");
	}
}

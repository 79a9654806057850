//! Loss logs: a CSV per run and a PNG plot drawn with plotters' bitmap backend, using the
//! embedded DejaVu Sans font (no system fonts needed).

use std::io::Write;
use std::path::Path;
use std::sync::Once;

use plotters::prelude::*;

use crate::error::{Error, Result};

/// One logged optimizer step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LossRow {
	/// Optimizer step (1-based).
	pub step: usize,
	/// Training tokens seen so far.
	pub tokens: u64,
	/// Mean training loss of this step (nats/token).
	pub loss: f32,
	/// Held-out loss if evaluated at this step.
	pub eval_loss: Option<f32>,
	/// Learning rate used.
	pub lr: f32,
	/// Throughput of this run so far (tokens/s, wall clock).
	pub tokens_per_s: f64,
}

/// Write `rows` as CSV with header `step,tokens,loss,eval_loss,lr,tokens_per_s`.
///
/// # Errors
/// I/O errors.
pub fn write_csv(path: impl AsRef<Path>, rows: &[LossRow]) -> Result<()> {
	let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
	writeln!(f, "step,tokens,loss,eval_loss,lr,tokens_per_s")?;
	for r in rows {
		let ev = r.eval_loss.map(|v| v.to_string()).unwrap_or_default();
		writeln!(f, "{},{},{},{},{},{:.1}", r.step, r.tokens, r.loss, ev, r.lr, r.tokens_per_s)?;
	}
	Ok(f.flush()?)
}

static FONT: Once = Once::new();

fn register_font() {
	FONT.call_once(|| {
		// DejaVu Sans is a valid TrueType font; registration cannot fail for it.
		let _ = plotters::style::register_font(
			"sans-serif",
			FontStyle::Normal,
			dejavu::sans::regular(),
		);
	});
}

/// A named `(x, y)` series.
pub type Series<'a> = (&'a str, Vec<(f64, f64)>);

/// Draw `series` (x: step or tokens, y: loss) as lines in an 900×540 PNG at `path`.
///
/// # Errors
/// [`Error::Data`] if no series has a finite point; drawing or I/O errors as [`Error::Data`].
pub fn plot_png(
	path: impl AsRef<Path>,
	title: &str,
	x_label: &str,
	series: &[Series<'_>],
) -> Result<()> {
	register_font();
	let pts = series
		.iter()
		.flat_map(|(_, v)| v.iter())
		.filter(|(x, y)| x.is_finite() && y.is_finite());
	let (mut x0, mut x1, mut y0, mut y1) =
		(f64::INFINITY, f64::NEG_INFINITY, f64::INFINITY, f64::NEG_INFINITY);
	for &(x, y) in pts {
		x0 = x0.min(x);
		x1 = x1.max(x);
		y0 = y0.min(y);
		y1 = y1.max(y);
	}
	if !x0.is_finite() {
		return Err(Error::Data("nothing to plot".into()));
	}
	if x1 <= x0 {
		x1 = x0 + 1.0;
	}
	let pad = ((y1 - y0) * 0.05).max(1e-3);
	let err = |e: String| Error::Data(format!("plot {}: {e}", path.as_ref().display()));
	let root = BitMapBackend::new(path.as_ref(), (900, 540)).into_drawing_area();
	root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
	let mut chart = ChartBuilder::on(&root)
		.caption(title, ("sans-serif", 22))
		.margin(12)
		.x_label_area_size(40)
		.y_label_area_size(60)
		.build_cartesian_2d(x0..x1, (y0 - pad)..(y1 + pad))
		.map_err(|e| err(e.to_string()))?;
	chart
		.configure_mesh()
		.x_desc(x_label)
		.y_desc("loss (nats/token)")
		.label_style(("sans-serif", 14))
		.draw()
		.map_err(|e| err(e.to_string()))?;
	let colors = [BLUE, RED, GREEN, MAGENTA, CYAN, BLACK];
	for (i, (name, v)) in series.iter().enumerate() {
		let c = colors[i % colors.len()];
		chart
			.draw_series(LineSeries::new(
				v.iter().copied().filter(|(x, y)| x.is_finite() && y.is_finite()),
				c.stroke_width(2),
			))
			.map_err(|e| err(e.to_string()))?
			.label(*name)
			.legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
	}
	chart
		.configure_series_labels()
		.background_style(WHITE.mix(0.8))
		.border_style(BLACK)
		.label_font(("sans-serif", 14))
		.draw()
		.map_err(|e| err(e.to_string()))?;
	root.present().map_err(|e| err(e.to_string()))?;
	Ok(())
}

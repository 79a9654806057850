//! Server-side SVG line charts, written with maud so every label is escaped like the rest of the page.
//!
//! One chart type covers the dashboard: lines over a shared x axis with "nice" ticks (1, 2, 5 × 10^k),
//! drawn with SVG presentation attributes only (no `style` attributes, no script), so the page's
//! content-security policy needs no exception. Non-finite points are dropped.

use maud::{html, Markup};

/// One line of a chart.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
	/// Legend text.
	pub name: String,
	/// `(x, y)` points, in x order.
	pub points: Vec<(f64, f64)>,
}

/// A line chart: title, axis labels, lines.
#[derive(Clone, Debug, PartialEq)]
pub struct LineChart {
	/// Title above the plot (also the SVG's accessible name).
	pub title: String,
	/// X axis label.
	pub x_label: String,
	/// Y axis label.
	pub y_label: String,
	/// How x tick values are written.
	pub x_format: TickFormat,
	/// The lines.
	pub series: Vec<Series>,
}

/// How tick values are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TickFormat {
	/// Plain numbers with k/M/G suffixes.
	Number,
	/// Milliseconds since the Unix epoch, written as UTC `HH:MM:SS`.
	ClockMs,
}

/// Line colours, in series order (repeats after eight).
pub const PALETTE: [&str; 8] =
	["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#ca8a04", "#db2777"];

const W: f64 = 640.0;
const H: f64 = 260.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 36.0;
const TOP: f64 = 28.0;
const BOTTOM: f64 = 44.0;

/// About `target` round tick values covering `[lo, hi]` (steps of 1, 2 or 5 × 10^k).
pub fn nice_ticks(lo: f64, hi: f64, target: usize) -> Vec<f64> {
	if !lo.is_finite() || !hi.is_finite() || target == 0 {
		return Vec::new();
	}
	let (lo, hi) = if hi > lo { (lo, hi) } else { (lo - 0.5, lo + 0.5) };
	let raw = (hi - lo) / target as f64;
	let mag = 10f64.powf(raw.log10().floor());
	let step = [1.0, 2.0, 5.0, 10.0]
		.iter()
		.map(|m| m * mag)
		.find(|s| *s >= raw)
		.unwrap_or(10.0 * mag);
	let first = (lo / step).ceil() as i64;
	let last = (hi / step).floor() as i64;
	(first..=last).map(|i| i as f64 * step).collect()
}

/// A number with a k/M/G suffix and at most three significant decimals.
pub fn format_number(v: f64) -> String {
	let a = v.abs();
	let (x, suffix) = if a >= 1e9 {
		(v / 1e9, "G")
	} else if a >= 1e6 {
		(v / 1e6, "M")
	} else if a >= 1e3 {
		(v / 1e3, "k")
	} else {
		(v, "")
	};
	let s = if x == x.trunc() {
		format!("{x:.0}")
	} else if x.abs() >= 100.0 {
		format!("{x:.1}")
	} else if x.abs() >= 1.0 {
		format!("{x:.2}")
	} else {
		format!("{x:.3}")
	};
	let s =
		if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.').to_string() } else { s };
	format!("{s}{suffix}")
}

/// Milliseconds since the Unix epoch as UTC `HH:MM:SS`.
pub fn format_clock(ms: u64) -> String {
	let s = ms / 1000;
	format!("{:02}:{:02}:{:02}", (s / 3600) % 24, (s / 60) % 60, s % 60)
}

fn fmt_tick(f: TickFormat, v: f64) -> String {
	match f {
		TickFormat::Number => format_number(v),
		TickFormat::ClockMs => format_clock(v.max(0.0) as u64),
	}
}

impl LineChart {
	/// The chart as an inline `<svg>` element, or a short "no data yet" note when no series has a
	/// finite point.
	pub fn render(&self) -> Markup {
		// (index, series, its finite points)
		type Finite<'a> = (usize, &'a Series, Vec<(f64, f64)>);
		let series: Vec<Finite> = self
			.series
			.iter()
			.enumerate()
			.map(|(i, s)| {
				(
					i,
					s,
					s.points
						.iter()
						.copied()
						.filter(|(x, y)| x.is_finite() && y.is_finite())
						.collect(),
				)
			})
			.collect();
		let all: Vec<(f64, f64)> = series.iter().flat_map(|(_, _, p)| p.iter().copied()).collect();
		if all.is_empty() {
			return html! {
				figure.chart {
					figcaption { (self.title) }
					p.empty { "no data yet" }
				}
			};
		}
		let (mut x0, mut x1) =
			all.iter().fold((f64::MAX, f64::MIN), |(a, b), (x, _)| (a.min(*x), b.max(*x)));
		let (mut y0, mut y1) =
			all.iter().fold((f64::MAX, f64::MIN), |(a, b), (_, y)| (a.min(*y), b.max(*y)));
		// A single x or y value: widen the axis around it (by 10 %, or 1 at zero), never below zero for
		// non-negative data (epochs, tokens, times).
		let widen = |lo: f64, hi: f64| -> (f64, f64) {
			if hi > lo {
				return (lo, hi);
			}
			let pad = if lo == 0.0 { 1.0 } else { lo.abs() * 0.1 };
			let new_lo = if lo >= 0.0 { (lo - pad).max(0.0) } else { lo - pad };
			(new_lo, hi + pad)
		};
		(x0, x1) = widen(x0, x1);
		(y0, y1) = widen(y0, y1);
		// Start the y axis at zero for non-negative data that is close to it.
		if y0 > 0.0 && y0 < 0.25 * y1 {
			y0 = 0.0;
		}
		let pw = W - LEFT - RIGHT;
		let ph = H - TOP - BOTTOM;
		let sx = |x: f64| LEFT + (x - x0) / (x1 - x0) * pw;
		let sy = |y: f64| TOP + ph - (y - y0) / (y1 - y0) * ph;
		let xt = nice_ticks(x0, x1, 5);
		let yt = nice_ticks(y0, y1, 4);
		let path = |pts: &[(f64, f64)]| -> String {
			pts.iter()
				.map(|(x, y)| format!("{:.1},{:.1}", sx(*x), sy(*y)))
				.collect::<Vec<_>>()
				.join(" ")
		};
		html! {
			figure.chart {
				figcaption { (self.title) }
				svg xmlns="http://www.w3.org/2000/svg" viewBox={"0 0 " (W) " " (H)} width=(W) height=(H)
					role="img" aria-label=(self.title) {
					rect x=(LEFT) y=(TOP) width=(pw) height=(ph) fill="#fafafa" stroke="#d4d4d8" {}
					@for t in &yt {
						line x1=(LEFT) x2=(LEFT + pw) y1=(format!("{:.1}", sy(*t))) y2=(format!("{:.1}", sy(*t)))
							stroke="#e4e4e7" {}
						text x=(LEFT - 6.0) y=(format!("{:.1}", sy(*t) + 4.0)) text-anchor="end" font-size="11"
							fill="#52525b" { (format_number(*t)) }
					}
					@for t in &xt {
						text x=(format!("{:.1}", sx(*t))) y=(TOP + ph + 16.0) text-anchor="middle" font-size="11"
							fill="#52525b" { (fmt_tick(self.x_format, *t)) }
					}
					text x=(LEFT + pw / 2.0) y=(H - 6.0) text-anchor="middle" font-size="12" fill="#27272a" { (self.x_label) }
					text x="14" y=(TOP + ph / 2.0) text-anchor="middle" font-size="12" fill="#27272a"
						transform={"rotate(-90 14 " (TOP + ph / 2.0) ")"} { (self.y_label) }
					@for (i, s, pts) in &series {
						@let colour = PALETTE[i % PALETTE.len()];
						@if pts.len() == 1 {
							circle cx=(format!("{:.1}", sx(pts[0].0))) cy=(format!("{:.1}", sy(pts[0].1))) r="3" fill=(colour) {}
						} @else if !pts.is_empty() {
							polyline points=(path(pts)) fill="none" stroke=(colour) stroke-width="2" {}
						}
						rect x=(LEFT + 8.0 + 120.0 * (*i as f64)) y="8" width="10" height="10" fill=(colour) {}
						text x=(LEFT + 22.0 + 120.0 * (*i as f64)) y="17" font-size="11" fill="#27272a" { (s.name) }
					}
				}
			}
		}
	}
}

#[cfg(test)]
mod tests {
	use super::*;

	#[test]
	fn ticks_are_round_and_cover_the_range() {
		assert_eq!(nice_ticks(0.0, 10.0, 5), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
		assert_eq!(nice_ticks(3.2, 4.1, 4), vec![3.5, 4.0]);
		assert_eq!(nice_ticks(0.0, 1234.0, 4), vec![0.0, 500.0, 1000.0]);
		assert!(nice_ticks(f64::NAN, 1.0, 5).is_empty());
		assert_eq!(
			nice_ticks(5.0, 5.0, 2),
			vec![4.5, 5.0, 5.5],
			"a flat range is widened around the value"
		);
	}

	#[test]
	fn numbers_and_clocks_format_compactly() {
		assert_eq!(format_number(0.0), "0");
		assert_eq!(format_number(1500.0), "1.5k");
		assert_eq!(format_number(2_000_000.0), "2M");
		assert_eq!(format_number(1.23456), "1.23");
		assert_eq!(format_number(0.1234), "0.123");
		assert_eq!(format_clock(3_723_000), "01:02:03");
	}

	#[test]
	fn chart_escapes_labels_and_draws_every_series() {
		let c = LineChart {
			title: "loss <script>alert(1)</script>".into(),
			x_label: "epoch".into(),
			y_label: "nats".into(),
			x_format: TickFormat::Number,
			series: vec![
				Series {
					name: "a&b".into(),
					points: vec![(0.0, 5.0), (1.0, 4.0), (2.0, f64::NAN)],
				},
				Series { name: "single".into(), points: vec![(1.0, 4.5)] },
			],
		};
		let svg = c.render().into_string();
		assert!(!svg.contains("<script>"), "{svg}");
		assert!(svg.contains("loss &lt;script&gt;alert(1)&lt;/script&gt;"));
		assert!(svg.contains("a&amp;b"));
		assert_eq!(
			svg.matches("<polyline").count(),
			1,
			"NaN point dropped, two finite points left"
		);
		assert_eq!(svg.matches("<circle").count(), 1, "a one-point series is a dot");
		assert!(!svg.contains("style="), "no inline styles (the CSP forbids them)");
	}

	#[test]
	fn points_map_inside_the_plot_area() {
		let c = LineChart {
			title: "t".into(),
			x_label: "x".into(),
			y_label: "y".into(),
			x_format: TickFormat::Number,
			series: vec![Series { name: "s".into(), points: vec![(0.0, 0.0), (10.0, 100.0)] }],
		};
		let svg = c.render().into_string();
		let pts = svg.split("points=\"").nth(1).unwrap().split('"').next().unwrap();
		let coords: Vec<(f64, f64)> = pts
			.split(' ')
			.map(|p| {
				let (x, y) = p.split_once(',').unwrap();
				(x.parse().unwrap(), y.parse().unwrap())
			})
			.collect();
		assert_eq!(coords, vec![(LEFT, H - BOTTOM), (W - RIGHT, TOP)]);
	}

	#[test]
	fn a_single_point_gets_a_readable_non_negative_axis() {
		let c = LineChart {
			title: "t".into(),
			x_label: "epoch".into(),
			y_label: "loss".into(),
			x_format: TickFormat::Number,
			series: vec![Series { name: "s".into(), points: vec![(0.0, 6.2)] }],
		};
		let svg = c.render().into_string();
		assert!(!svg.contains(">-"), "no negative tick for non-negative data: {svg}");
		let c = LineChart {
			series: vec![Series { name: "s".into(), points: vec![(1024.0, 6.2)] }],
			..c
		};
		let svg = c.render().into_string();
		assert_eq!(
			svg.matches(">1.02k<").count(),
			0,
			"ticks around 1024 are distinct round values: {svg}"
		);
		assert!(svg.contains(">1k<"));
	}

	#[test]
	fn empty_chart_says_so() {
		let c = LineChart {
			title: "nothing".into(),
			x_label: "x".into(),
			y_label: "y".into(),
			x_format: TickFormat::ClockMs,
			series: vec![Series { name: "s".into(), points: vec![(f64::INFINITY, 1.0)] }],
		};
		let out = c.render().into_string();
		assert!(out.contains("no data yet") && !out.contains("<svg"));
	}
}

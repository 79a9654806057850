//! Wire codec: round trips, the uint8 error bound, computed compression ratios and every
//! malformed-message path.

use candle_core::{DType, Device, Tensor};
use iota_model::wire::{
	self, compression, decode, decode_checked, encode, quantize_rows, Expect, Kind,
};
use iota_model::{Encoding, Error, ModelConfig};
use rand::{Rng, SeedableRng};

fn random(shape: (usize, usize, usize), seed: u64, scale: f32) -> Tensor {
	let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
	let n = shape.0 * shape.1 * shape.2;
	let v: Vec<f32> = (0..n)
		.map(|i| rng.random_range(-1.0..1.0) * scale * (1.0 + (i % 5) as f32))
		.collect();
	Tensor::from_vec(v, shape, &Device::Cpu).unwrap()
}

fn vals(t: &Tensor) -> Vec<f32> {
	t.flatten_all().unwrap().to_vec1::<f32>().unwrap()
}

#[test]
fn f32_is_exact_and_bf16_is_within_bf16_rounding() {
	let t = random((2, 5, 12), 1, 3.0);
	let e = Expect::btw(Kind::Activation, 12, 1 << 20);
	let back =
		decode(&encode(&t, Kind::Activation, Encoding::F32).unwrap(), &e, DType::F32, &Device::Cpu)
			.unwrap();
	assert_eq!(vals(&back), vals(&t));
	let back = decode(
		&encode(&t, Kind::Activation, Encoding::Bf16).unwrap(),
		&e,
		DType::F32,
		&Device::Cpu,
	)
	.unwrap();
	for (a, b) in vals(&t).iter().zip(vals(&back)) {
		assert!((a - b).abs() <= a.abs() * 2f32.powi(-8), "{a} vs {b}");
	}
}

#[test]
fn uint8_round_trip_error_is_at_most_half_a_step_per_row() {
	let w = 16;
	let t = random((3, 7, w), 2, 10.0);
	let bytes = encode(&t, Kind::Gradient, Encoding::U8).unwrap();
	let d = decode_checked(&bytes, &Expect::btw(Kind::Gradient, w, 1 << 20)).unwrap();
	let x = vals(&t);
	let mut worst_ratio = 0f32;
	for (row, back) in x.chunks(w).zip(d.values.chunks(w)) {
		let lo = row.iter().copied().fold(f32::INFINITY, f32::min);
		let hi = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
		let step = (hi - lo) / 255.0;
		for (a, b) in row.iter().zip(back) {
			let err = (a - b).abs();
			// Half a quantisation step, plus f32 rounding of the dequantisation.
			assert!(
				err <= step / 2.0 + 1e-6 * hi.abs().max(lo.abs()),
				"err {err} > step/2 {}",
				step / 2.0
			);
			worst_ratio = worst_ratio.max(err / step);
		}
		// Row extremes survive exactly-ish (min is the offset).
		assert!(
			back.iter().copied().fold(f32::INFINITY, f32::min) - lo <= 1e-6 * lo.abs().max(1.0)
		);
	}
	assert!(worst_ratio > 0.3, "the bound is tight, not vacuous ({worst_ratio})");
	// A constant row quantises exactly.
	let (q, s, o) = quantize_rows(&[2.5; 4], 4).unwrap();
	assert_eq!(wire::dequantize_rows(&q, &s, &o, 4), vec![2.5; 4]);
}

#[test]
fn compression_ratio_is_64x_for_width_and_128x_with_uint8_for_the_reference_shape() {
	let cfg = ModelConfig::ref_1_5b();
	let b = cfg.wire_width();
	assert_eq!(cfg.width_ratio(), 64.0);
	let t = random((2, 32, b), 3, 1.0);
	let bf16 =
		compression(&encode(&t, Kind::Activation, Encoding::Bf16).unwrap(), cfg.d_model).unwrap();
	let u8c =
		compression(&encode(&t, Kind::Activation, Encoding::U8).unwrap(), cfg.d_model).unwrap();
	assert_eq!(bf16.baseline_bytes, 2 * 32 * 2048 * 2);
	assert_eq!(bf16.payload_ratio, 64.0);
	assert_eq!(u8c.payload_ratio, 128.0);
	// Whole messages pay a header and, for uint8, 8 bytes of scale/offset per 32-byte row.
	assert!(bf16.wire_ratio < 64.0 && bf16.wire_ratio > 55.0, "{bf16:?}");
	assert!(u8c.wire_ratio < 128.0 && u8c.wire_ratio > 90.0, "{u8c:?}");
	// Without the bottleneck, bf16 on the wire is 1x.
	let full = random((1, 4, 64), 4, 1.0);
	assert_eq!(
		compression(&encode(&full, Kind::Activation, Encoding::Bf16).unwrap(), 64)
			.unwrap()
			.payload_ratio,
		1.0
	);
}

#[test]
fn malformed_messages_are_typed_errors() {
	let w = 8;
	let t = random((2, 4, w), 5, 1.0);
	let good = encode(&t, Kind::Activation, Encoding::U8).unwrap();
	let expect = Expect::btw(Kind::Activation, w, 1 << 20);
	assert!(decode_checked(&good, &expect).is_ok());

	// Truncated anywhere: header length, header, data.
	for cut in [0, 4, 9, good.len() / 2, good.len() - 1] {
		assert!(
			matches!(decode_checked(&good[..cut], &expect), Err(Error::WireTruncated { .. })),
			"cut at {cut}"
		);
	}
	// Not ours: a safetensors file without our metadata.
	let plain = safetensors::serialize(
		[(
			"data",
			safetensors::tensor::TensorView::new(safetensors::Dtype::F32, vec![1, 1, 1], &[0u8; 4])
				.unwrap(),
		)],
		None,
	)
	.unwrap();
	assert!(
		matches!(decode_checked(&plain, &expect), Err(Error::Wire(m)) if m.contains("not an iota-wire"))
	);
	// Too large.
	assert!(matches!(
		decode_checked(&good, &Expect::btw(Kind::Activation, w, 10)),
		Err(Error::WireTooLarge { .. })
	));
	// Wrong kind, wrong width, wrong rank.
	assert!(
		matches!(decode_checked(&good, &Expect::btw(Kind::Gradient, w, 1 << 20)), Err(Error::Wire(m)) if m.contains("gradient"))
	);
	assert!(matches!(
		decode_checked(&good, &Expect::btw(Kind::Activation, w + 1, 1 << 20)),
		Err(Error::Shape { .. })
	));
	let rank2 = Expect { kind: Kind::Activation, shape: vec![None, None], max_bytes: 1 << 20 };
	assert!(matches!(decode_checked(&good, &rank2), Err(Error::Shape { .. })));

	// Hand-built messages with bad contents.
	let msg = |enc: &str,
	           kind: &str,
	           tensors: Vec<(&str, safetensors::Dtype, Vec<usize>, Vec<u8>)>| {
		let views: Vec<_> = tensors
			.iter()
			.map(|(n, dt, s, d)| {
				(n.to_string(), safetensors::tensor::TensorView::new(*dt, s.clone(), d).unwrap())
			})
			.collect();
		let meta = std::collections::HashMap::from([
			("iota.wire".to_string(), "1".to_string()),
			("iota.kind".to_string(), kind.to_string()),
			("iota.encoding".to_string(), enc.to_string()),
		]);
		safetensors::serialize(views, Some(meta)).unwrap()
	};
	let f32s = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
	let e1 = Expect::btw(Kind::Activation, 2, 1 << 20);
	// NaN and Inf in f32 data.
	let nan = msg(
		"f32",
		"activation",
		vec![("data", safetensors::Dtype::F32, vec![1, 1, 2], f32s(&[1.0, f32::NAN]))],
	);
	assert!(matches!(decode_checked(&nan, &e1), Err(Error::NonFinite { index: 1, .. })));
	let inf = msg(
		"f32",
		"activation",
		vec![("data", safetensors::Dtype::F32, vec![1, 1, 2], f32s(&[f32::INFINITY, 0.0]))],
	);
	assert!(matches!(decode_checked(&inf, &e1), Err(Error::NonFinite { index: 0, .. })));
	// Encoding says bf16, data is f32.
	let mismatch = msg(
		"bf16",
		"activation",
		vec![("data", safetensors::Dtype::F32, vec![1, 1, 2], f32s(&[1.0, 2.0]))],
	);
	assert!(matches!(decode_checked(&mismatch, &e1), Err(Error::DType { .. })));
	// Unknown encoding and kind; missing data.
	let unk = msg(
		"int4",
		"activation",
		vec![("data", safetensors::Dtype::F32, vec![1, 1, 2], f32s(&[1.0, 2.0]))],
	);
	assert!(matches!(decode_checked(&unk, &e1), Err(Error::Wire(m)) if m.contains("int4")));
	let unk_kind = msg(
		"f32",
		"weights",
		vec![("data", safetensors::Dtype::F32, vec![1, 1, 2], f32s(&[1.0, 2.0]))],
	);
	assert!(matches!(decode_checked(&unk_kind, &e1), Err(Error::Wire(m)) if m.contains("weights")));
	let no_data = msg(
		"f32",
		"activation",
		vec![("other", safetensors::Dtype::F32, vec![1, 1, 2], f32s(&[1.0, 2.0]))],
	);
	assert!(matches!(decode_checked(&no_data, &e1), Err(Error::Wire(m)) if m.contains("data")));
	// u8 with missing scale, wrong-length offset, NaN scale, negative scale.
	let q = vec![1u8, 2];
	let no_scale =
		msg("u8", "activation", vec![("data", safetensors::Dtype::U8, vec![1, 1, 2], q.clone())]);
	assert!(matches!(decode_checked(&no_scale, &e1), Err(Error::Wire(m)) if m.contains("scale")));
	let short = msg(
		"u8",
		"activation",
		vec![
			("data", safetensors::Dtype::U8, vec![1, 1, 2], q.clone()),
			("scale", safetensors::Dtype::F32, vec![1], f32s(&[0.1])),
			("offset", safetensors::Dtype::F32, vec![2], f32s(&[0.0, 0.0])),
		],
	);
	assert!(matches!(decode_checked(&short, &e1), Err(Error::Shape { .. })));
	let nan_scale = msg(
		"u8",
		"activation",
		vec![
			("data", safetensors::Dtype::U8, vec![1, 1, 2], q.clone()),
			("scale", safetensors::Dtype::F32, vec![1], f32s(&[f32::NAN])),
			("offset", safetensors::Dtype::F32, vec![1], f32s(&[0.0])),
		],
	);
	assert!(matches!(decode_checked(&nan_scale, &e1), Err(Error::NonFinite { .. })));
	let neg_scale = msg(
		"u8",
		"activation",
		vec![
			("data", safetensors::Dtype::U8, vec![1, 1, 2], q),
			("scale", safetensors::Dtype::F32, vec![1], f32s(&[-1.0])),
			("offset", safetensors::Dtype::F32, vec![1], f32s(&[0.0])),
		],
	);
	assert!(
		matches!(decode_checked(&neg_scale, &e1), Err(Error::Wire(m)) if m.contains("negative"))
	);
	// Zero-sized dimension.
	let empty =
		msg("f32", "activation", vec![("data", safetensors::Dtype::F32, vec![0, 1, 2], vec![])]);
	assert!(matches!(decode_checked(&empty, &e1), Err(Error::Shape { .. })));

	// Nothing non-finite is ever sent.
	let bad = Tensor::new(&[[[1f32, f32::NAN]]], &Device::Cpu).unwrap();
	for enc in [Encoding::F32, Encoding::Bf16, Encoding::U8] {
		assert!(matches!(
			encode(&bad, Kind::Activation, enc),
			Err(Error::NonFinite { index: 1, .. })
		));
	}
}

#[test]
fn uint8_pipeline_trains_with_straight_through_gradients() {
	// A u8 wire changes the numbers slightly but the loss and gradients stay close to exact.
	let cfg = ModelConfig::tiny();
	let dev = Device::Cpu;
	let x = Tensor::from_vec((0..32u32).map(|i| (i * 37) % 512).collect::<Vec<_>>(), (2, 16), &dev)
		.unwrap();
	let y =
		Tensor::from_vec((0..32u32).map(|i| (i * 91 + 5) % 512).collect::<Vec<_>>(), (2, 16), &dev)
			.unwrap();
	let mut exact = iota_model::Pipeline::new(&cfg, 3, DType::F32, &dev, None).unwrap();
	let mut q = iota_model::Pipeline::new(&cfg, 3, DType::F32, &dev, Some(Encoding::U8)).unwrap();
	let (le, lq) = (exact.forward_backward(&x, &y).unwrap(), q.forward_backward(&x, &y).unwrap());
	assert!((le - lq).abs() < 1e-3 * le, "{le} vs {lq}");
	assert_ne!(le, lq, "the quantiser really ran");
	for s in 0..3 {
		let (ge, _) = exact.stages_mut()[s].take_gradient().unwrap();
		let (gq, _) = q.stages_mut()[s].take_gradient().unwrap();
		let dot: f64 = ge.iter().zip(&gq).map(|(a, b)| (*a as f64) * (*b as f64)).sum();
		let cos = dot / (iota_model::optim::l2_norm(&ge) * iota_model::optim::l2_norm(&gq));
		assert!(cos > 0.99, "stage {s}: cosine(exact, u8) gradient = {cos}");
	}
}

//! A sample's tokens as the model sees them. The corpus is stored as rows of `T + 1` tokens; a sample
//! is `B` consecutive rows (where is the run spec's data manifest's business). The head feeds the
//! inputs, the tail scores against the targets, and a validator recomputing either must cut the rows
//! the same way: this is that one cut.

/// Inputs and targets `[B, T]` (row-major) of `rows`, `B` stored rows of `seq_len + 1` tokens each:
/// inputs `row[0..T]`, targets `row[1..T+1]` (next-token prediction). `None` when `rows` is not a
/// whole number of stored rows or `seq_len` is 0.
pub fn inputs_and_targets(rows: &[u32], seq_len: usize) -> Option<(Vec<u32>, Vec<u32>)> {
	let w = seq_len.checked_add(1)?;
	if seq_len == 0 || !rows.len().is_multiple_of(w) {
		return None;
	}
	let b = rows.len() / w;
	let (mut inputs, mut targets) =
		(Vec::with_capacity(b * seq_len), Vec::with_capacity(b * seq_len));
	for row in rows.chunks_exact(w) {
		inputs.extend_from_slice(&row[..seq_len]);
		targets.extend_from_slice(&row[1..]);
	}
	Some((inputs, targets))
}

#[cfg(test)]
mod tests {
	use super::*;

	#[test]
	fn targets_are_the_inputs_shifted_by_one_token_per_row() {
		let rows = [1, 2, 3, 10, 20, 30];
		assert_eq!(inputs_and_targets(&rows, 2), Some((vec![1, 2, 10, 20], vec![2, 3, 20, 30])));
		assert_eq!(inputs_and_targets(&rows[..5], 2), None);
		assert_eq!(inputs_and_targets(&rows, 0), None);
		assert_eq!(inputs_and_targets(&[], 4), Some((vec![], vec![])));
	}
}

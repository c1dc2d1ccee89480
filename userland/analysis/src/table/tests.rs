use std::collections::HashMap;

use super::Table;

/// Random inserts, updates and removals against a standard map: the table grows, probes
/// collide (it is up to half full) and removals shift entries back.
#[test]
fn matches_a_standard_map() {
    let mut table: Table<u64, u64> = Table::default();
    let mut model: HashMap<u64, u64> = HashMap::new();
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for step in 0..100_000u64 {
        let key = (next() % 2000) << (next() % 3 * 20);
        match next() % 3 {
            0 => {
                *table.get_or_default(key) += step;
                *model.entry(key).or_default() += step;
            }
            1 => {
                table.remove(key);
                model.remove(&key);
            }
            _ => assert_eq!(table.get(key), model.get(&key), "{key:#x}"),
        }
        assert_eq!(table.len(), model.len());
    }
    let mut all: Vec<(u64, u64)> = table.iter().map(|(k, &v)| (k, v)).collect();
    let mut expected: Vec<(u64, u64)> = model.into_iter().collect();
    all.sort_unstable();
    expected.sort_unstable();
    assert_eq!(all, expected);
}

//! What both views say they could not see.

use crate::cache::CacheModel;

/// Notes both views share: what the address set and the geometry cannot show.
pub(super) fn common_notes(model: &CacheModel) -> Vec<String> {
    let mut notes = vec![
        "objects allocated before collection started are not in the address set: their \
         accesses, lines and lifetimes are not seen"
            .to_owned(),
        "only slab types are shown: globals, per-CPU data and stacks have no address set"
            .to_owned(),
    ];
    if model.levels.is_empty() {
        notes.push(
            "no cache geometry: conflict, capacity, histograms and the simulation are empty \
             (--cache gives one)"
                .to_owned(),
        );
    } else {
        notes.push(crate::cache::VIRTUAL_INDEX_NOTE.to_owned());
    }
    notes.extend(model.notes.iter().cloned());
    notes
}

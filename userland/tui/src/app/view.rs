//! The views the browser shows, in tab order.

/// The views, in tab order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum View {
    /// Types ranked by misses or samples, with the coverage line and the bounce flag.
    DataProfile,
    /// One type: its bytes as a heat strip, its offsets, functions and CPUs.
    TypeDetail,
    /// Invalidation, conflict and capacity misses per type, with their evidence.
    MissClassification,
    /// Live objects over time and the associativity-set histogram.
    WorkingSet,
    /// The functions that touch an object from allocation to free.
    DataFlow,
    /// Program speedup against virtual speedup per type.
    Causal,
}

impl View {
    /// Every view, in tab order.
    pub const ALL: [Self; 6] = [
        Self::DataProfile,
        Self::TypeDetail,
        Self::MissClassification,
        Self::WorkingSet,
        Self::DataFlow,
        Self::Causal,
    ];

    /// The tab's title.
    #[must_use]
    pub const fn title(self) -> &'static str {
        match self {
            Self::DataProfile => "Data profile",
            Self::TypeDetail => "Type",
            Self::MissClassification => "Misses",
            Self::WorkingSet => "Working set",
            Self::DataFlow => "Data flow",
            Self::Causal => "Causal",
        }
    }

    /// Position in [`View::ALL`].
    #[must_use]
    pub const fn index(self) -> usize {
        self as usize
    }

    /// Whether the view is about one type (the one selected in the data profile).
    #[must_use]
    pub const fn is_per_type(self) -> bool {
        !matches!(self, Self::DataProfile)
    }

    pub(super) fn offset(self, by: isize) -> Self {
        let n = Self::ALL.len() as isize;
        Self::ALL[(self.index() as isize + by).rem_euclid(n) as usize]
    }
}

//! Nearest-rank percentiles, for the lateness figures of `demo` and `bench`.

/// p50, p90, p99, max, min by nearest rank.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Percentiles {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
    #[cfg_attr(not(feature = "bench"), allow(dead_code))]
    pub min: f64,
}

/// Nearest rank: the p-th percentile is the sorted value at 1-based rank ceil(p/100 · n).
pub(crate) fn percentiles(mut v: Vec<f64>) -> Percentiles {
    if v.is_empty() {
        return Percentiles::default();
    }
    v.sort_by(f64::total_cmp);
    let rank = |p: f64| {
        let r = ((p / 100.0) * v.len() as f64).ceil() as usize;
        v[r.clamp(1, v.len()) - 1]
    };
    Percentiles {
        p50: rank(50.0),
        p90: rank(90.0),
        p99: rank(99.0),
        max: v[v.len() - 1],
        min: v[0],
    }
}

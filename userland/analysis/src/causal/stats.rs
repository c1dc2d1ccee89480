//! Least squares and Student's t, computed here: the workspace has no statistics crate, and
//! the two needs are small (a slope's standard error, one quantile per fit).

/// A least-squares line `y = intercept + slope x` with its slope's standard error.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LineFit {
    /// The slope.
    pub slope: f64,
    /// The intercept.
    pub intercept: f64,
    /// Standard error of the slope: `sqrt(residual variance / sum (x - mean x)^2)`, the
    /// residual variance over `points - 2` degrees of freedom.
    pub slope_std_error: f64,
    /// Points fitted.
    pub points: usize,
}

impl LineFit {
    /// The fit of `points` (x, y); `None` with fewer than 3 points (no degree of freedom
    /// left for the error) or when every x is the same.
    #[must_use]
    pub fn of(points: &[(f64, f64)]) -> Option<Self> {
        let n = points.len();
        if n < 3 {
            return None;
        }
        let count = n as f64;
        let mean_x = points.iter().map(|p| p.0).sum::<f64>() / count;
        let mean_y = points.iter().map(|p| p.1).sum::<f64>() / count;
        let sxx: f64 = points.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
        if sxx <= 0.0 {
            return None;
        }
        let sxy: f64 = points.iter().map(|p| (p.0 - mean_x) * (p.1 - mean_y)).sum();
        let slope = sxy / sxx;
        let intercept = mean_y - slope * mean_x;
        let residuals: f64 = points
            .iter()
            .map(|p| (p.1 - intercept - slope * p.0).powi(2))
            .sum();
        let variance = residuals / (count - 2.0);
        Some(Self {
            slope,
            intercept,
            slope_std_error: (variance / sxx).sqrt(),
            points: n,
        })
    }

    /// `points - 2`.
    #[must_use]
    pub fn degrees_of_freedom(&self) -> f64 {
        self.points as f64 - 2.0
    }
}

/// A sample's mean with its standard error (`sd / sqrt(n)`, the sample's variance over
/// `n - 1` degrees of freedom).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MeanFit {
    /// The mean.
    pub mean: f64,
    /// Its standard error.
    pub std_error: f64,
    /// Values.
    pub points: usize,
}

impl MeanFit {
    /// The mean of `values`; `None` with fewer than 2 (no degree of freedom for the error).
    #[must_use]
    pub fn of(values: &[f64]) -> Option<Self> {
        let n = values.len();
        if n < 2 {
            return None;
        }
        let count = n as f64;
        let mean = values.iter().sum::<f64>() / count;
        let variance = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (count - 1.0);
        Some(Self {
            mean,
            std_error: (variance / count).sqrt(),
            points: n,
        })
    }

    /// `points - 1`.
    #[must_use]
    pub fn degrees_of_freedom(&self) -> f64 {
        self.points as f64 - 1.0
    }
}

/// The `p` quantile (0 < p < 1) of Student's t distribution with `df` degrees of freedom:
/// the `t` with `P(T <= t) = p`. Found by bisection on the distribution function, which is
/// the regularized incomplete beta function: `P(T <= t) = 1 - I_x(df/2, 1/2) / 2` for
/// `t >= 0`, with `x = df / (df + t^2)`.
#[must_use]
pub fn student_t_quantile(p: f64, df: f64) -> f64 {
    if p.is_nan() || df.is_nan() || p <= 0.0 || p >= 1.0 || df <= 0.0 {
        return f64::NAN;
    }
    if p < 0.5 {
        return -student_t_quantile(1.0 - p, df);
    }
    let (mut low, mut high) = (0.0_f64, 1.0_f64);
    while student_t_cdf(high, df) < p {
        low = high;
        high *= 2.0;
        if high > 1e12 {
            return f64::INFINITY;
        }
    }
    // 200 halvings take any bracket below f64 resolution.
    for _ in 0..200 {
        let mid = 0.5 * (low + high);
        if student_t_cdf(mid, df) < p {
            low = mid;
        } else {
            high = mid;
        }
        if high - low <= f64::EPSILON * high {
            break;
        }
    }
    0.5 * (low + high)
}

/// `P(T <= t)` for Student's t with `df` degrees of freedom.
#[must_use]
pub fn student_t_cdf(t: f64, df: f64) -> f64 {
    let x = df / (df + t * t);
    let tail = 0.5 * regularized_incomplete_beta(0.5 * df, 0.5, x);
    if t >= 0.0 {
        1.0 - tail
    } else {
        tail
    }
}

/// `I_x(a, b)`, by the continued fraction (modified Lentz), on the side where it converges
/// fast and by symmetry `I_x(a, b) = 1 - I_{1-x}(b, a)` on the other.
fn regularized_incomplete_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let ln_front = ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln();
    let front = ln_front.exp();
    if x < (a + 1.0) / (a + b + 2.0) {
        front * beta_continued_fraction(a, b, x) / a
    } else {
        1.0 - front * beta_continued_fraction(b, a, 1.0 - x) / b
    }
}

#[expect(
    clippy::many_single_char_names,
    reason = "the letters of the continued fraction's formulas (Lentz's c, d, h)"
)]
fn beta_continued_fraction(a: f64, b: f64, x: f64) -> f64 {
    const TINY: f64 = 1e-300;
    const MAX_TERMS: u32 = 500;
    let not_zero = |v: f64| if v.abs() < TINY { TINY } else { v };
    let mut c = 1.0;
    let mut d = 1.0 / not_zero(1.0 - (a + b) * x / (a + 1.0));
    let mut h = d;
    for m in 1..=MAX_TERMS {
        let m = f64::from(m);
        let even = m * (b - m) * x / ((a + 2.0 * m - 1.0) * (a + 2.0 * m));
        d = 1.0 / not_zero(1.0 + even * d);
        c = not_zero(1.0 + even / c);
        h *= d * c;
        let odd = -(a + m) * (a + b + m) * x / ((a + 2.0 * m) * (a + 2.0 * m + 1.0));
        d = 1.0 / not_zero(1.0 + odd * d);
        c = not_zero(1.0 + odd / c);
        let step = d * c;
        h *= step;
        if (step - 1.0).abs() < 1e-15 {
            break;
        }
    }
    h
}

/// `ln Gamma(x)` for `x > 0` (Lanczos, g = 7, 9 terms: about 15 significant digits).
fn ln_gamma(x: f64) -> f64 {
    const G: f64 = 7.0;
    const COEFFICIENTS: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection: Gamma(x) Gamma(1 - x) = pi / sin(pi x).
        return (std::f64::consts::PI / (std::f64::consts::PI * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut sum = COEFFICIENTS[0];
    for (i, c) in COEFFICIENTS.iter().enumerate().skip(1) {
        sum += c / (x + i as f64);
    }
    let t = x + G + 0.5;
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + sum.ln()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two-sided 95% critical values from a printed t table (3 decimals).
    #[test]
    fn t_quantiles_match_the_table() {
        let table = [
            (1.0, 12.706),
            (2.0, 4.303),
            (3.0, 3.182),
            (4.0, 2.776),
            (5.0, 2.571),
            (8.0, 2.306),
            (10.0, 2.228),
            (20.0, 2.086),
            (30.0, 2.042),
            (60.0, 2.000),
            (120.0, 1.980),
        ];
        for (df, expected) in table {
            let t = student_t_quantile(0.975, df);
            assert!((t - expected).abs() < 6e-4, "df {df}: {t} vs {expected}");
        }
        // One-sided 99% and 90% points, and symmetry.
        assert!((student_t_quantile(0.99, 10.0) - 2.764).abs() < 6e-4);
        assert!((student_t_quantile(0.90, 5.0) - 1.476).abs() < 6e-4);
        assert!((student_t_quantile(0.025, 5.0) + 2.571).abs() < 6e-4);
        assert!((student_t_quantile(0.5, 7.0)).abs() < 1e-12);
        // Many degrees of freedom: the normal's 1.960.
        assert!((student_t_quantile(0.975, 1e6) - 1.960).abs() < 6e-4);
    }

    #[test]
    fn ln_gamma_of_known_values() {
        assert!(ln_gamma(1.0).abs() < 1e-13);
        assert!((ln_gamma(5.0) - 24.0_f64.ln()).abs() < 1e-12);
        assert!((ln_gamma(0.5) - std::f64::consts::PI.sqrt().ln()).abs() < 1e-12);
    }

    #[test]
    fn line_fit_of_an_exact_line_and_of_a_known_scatter() {
        let exact: Vec<(f64, f64)> = (0..5)
            .map(|i| (f64::from(i), 1.0 + 2.0 * f64::from(i)))
            .collect();
        let fit = LineFit::of(&exact).expect("fits");
        assert!((fit.slope - 2.0).abs() < 1e-12 && (fit.intercept - 1.0).abs() < 1e-12);
        assert!(fit.slope_std_error < 1e-12);
        // x = 0..4, y = 0, 1, 1, 3, 4: slope 1.0, intercept -0.2, SSE 0.8 over 3 df,
        // Sxx 10: se = sqrt(1.6 / 3 / 10).
        let scatter = [(0.0, 0.0), (1.0, 1.0), (2.0, 1.0), (3.0, 3.0), (4.0, 4.0)];
        let fit = LineFit::of(&scatter).expect("fits");
        assert!((fit.slope - 1.0).abs() < 1e-12);
        assert!((fit.intercept + 0.2).abs() < 1e-12);
        assert!((fit.slope_std_error - (0.8_f64 / 30.0).sqrt()).abs() < 1e-12);
        assert_eq!(LineFit::of(&scatter[..2]), None);
        assert_eq!(LineFit::of(&[(1.0, 0.0), (1.0, 1.0), (1.0, 2.0)]), None);
    }
}

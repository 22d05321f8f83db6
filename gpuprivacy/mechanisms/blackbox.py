"""Black-box estimation over covering designs (seed 002).

Steinke & Steinke, *Privately Estimating Black-Box Statistics*: the robust
order statistics of a covering design's oracle values, the pure-DP
exponential-mechanism estimator, the zCDP noisy binary search and the
binary-output version. This module only re-exports.
"""

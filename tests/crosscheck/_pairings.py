"""The pairings the cross-check tests cover: one id per topic, shared by the tests, the doc generator
and the staleness test. Imports no peer library, so it loads without the ``crosscheck`` extra."""

# id -> (title, gpuprivacy side, peers)
PAIRINGS = {
    "analytic-gaussian-sigma": (
        "Analytic Gaussian sigma (Balle & Wang 2018)",
        "accounting.gaussian_sigma_analytic",
        "dp-accounting, autodp, diffprivlib"),
    "analytic-gaussian-delta": (
        "Analytic Gaussian delta at a given epsilon (Balle & Wang 2018, Thm 8)",
        "accounting.gaussian_delta_analytic",
        "dp-accounting, autodp"),
    "analytic-gaussian-epsilon": (
        "Analytic Gaussian epsilon at a given sigma and delta",
        "accounting.gaussian_epsilon_analytic",
        "dp-accounting, autodp"),
    "classic-gaussian-sigma": (
        "Classic Gaussian sigma (Dwork & Roth 2014, Thm A.1)",
        "accounting.gaussian_sigma_classic",
        "diffprivlib, autodp"),
    "laplace-scale": (
        "Laplace scale Delta/epsilon",
        "mechanisms.laplace_mechanism (info.scale)",
        "OpenDP, diffprivlib, autodp"),
    "zcdp-gaussian-sigma": (
        "Gaussian sigma for rho-zCDP (Bun & Steinke 2016, Prop. 1.6)",
        "accounting.gaussian_sigma_zcdp",
        "OpenDP"),
    "zcdp-to-approx-cks": (
        "zCDP to (epsilon, delta), Canonne-Kamath-Steinke (2020, Cor. 13)",
        "accounting.zcdp_epsilon_cks",
        "OpenDP"),
    "zcdp-to-approx-bun-steinke": (
        "zCDP to (epsilon, delta), Bun & Steinke (2016, Prop. 1.3)",
        "accounting.zcdp_epsilon_bun_steinke",
        "autodp, OpenDP"),
    "gaussian-rdp-curve": (
        "Gaussian RDP curve (Mironov 2017, Prop. 7)",
        "accounting.gaussian_rdp",
        "dp-accounting, autodp"),
    "rdp-to-approx": (
        "RDP to (epsilon, delta): Mironov Prop. 3 and Balle et al. 2020 Thm 21",
        "accounting.rdp_to_dp_epsilon",
        "dp-accounting, autodp"),
    "composition": (
        "Basic composition and pure-DP to zCDP",
        "accounting.compose, PureDP.to_zcdp, ZCDP.to_approx",
        "OpenDP"),
    "selection-guarantees": (
        "Guarantees of the selection mechanisms",
        "mechanisms.*_guarantee",
        "OpenDP"),
    "discrete-laplace-sampler": (
        "Discrete Laplace sampler (CKS 2020, Alg. 2)",
        "noise.discrete_laplace",
        "OpenDP"),
    "discrete-gaussian-sampler": (
        "Discrete Gaussian sampler (CKS 2020, Alg. 3)",
        "noise.discrete_gaussian",
        "OpenDP"),
    "exponential-mechanism-law": (
        "Exponential mechanism law",
        "mechanisms.exponential_mechanism",
        "OpenDP, diffprivlib"),
    "report-noisy-max-law": (
        "Report noisy max law (Gumbel and exponential noise)",
        "mechanisms.report_noisy_max",
        "OpenDP"),
    "permute-and-flip-law": (
        "Permute-and-flip law (McKenna & Sheldon 2020)",
        "mechanisms.permute_and_flip",
        "OpenDP"),
    "exponential-median-law": (
        "Exponential-mechanism median law (Smith 2011)",
        "mechanisms.exponential_mechanism_median",
        "diffprivlib"),
}

# The peer libraries, by distribution name, as pinned in pyproject.toml's `crosscheck` extra.
PEERS = ("opendp", "dp-accounting", "autodp", "diffprivlib", "scikit-learn")

# Statistical tests fail with this probability when the code is right (project rule, STYLE rule 23).
ALPHA = 1e-6

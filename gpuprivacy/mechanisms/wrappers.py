"""Privacy wrappers for untrusted black-box functions (seed 000).

Linder et al., *Privately Evaluating Untrusted Black-Box Functions*: Shifted
Inverse, Sens-o-Matic, Subset Extension, Small-Diameter Subset Extension,
the Lipschitz filter, Double-Monotonization, and the baselines. This module
only re-exports; the code lives in ``gpuprivacy/mechanisms/_wrappers*.py``.
"""

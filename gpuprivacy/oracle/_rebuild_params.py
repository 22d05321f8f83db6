"""The parameter schema of every allowed primitive, checked engine-side against the operands' ranks.

JAX's own shape rules are written for the UNBATCHED call and accept values
whose meaning changes once the engine ``jax.vmap``s the oracle: ``sort`` with
``dimension=-1`` sorts the last axis of the unbatched block, but after
batching the last axis may be the subsets axis, so each subset would see the
others' data. The rebuild therefore states, for every primitive on the
allow-list, the exact set of parameter names JAX 0.10.2 emits
(:data:`PARAM_SCHEMA`), refuses any other name at parse time
(:func:`check_param_names`), and checks every value right before binding,
when the operand ranks are known (:func:`check_param_values`):

* an axis is a Python ``int`` (not a ``bool``) with ``0 <= axis < rank``;
  negative axes are refused, never normalised, because the batching rules
  do not normalise them either;
* a tuple of axes has no duplicates (and is increasing where XLA requires
  it); a permutation is a permutation of ``range(rank)``;
* sizes and counts are non-negative ``int``; ``split`` sizes sum to the
  split axis; slices, pads and precisions stay within the operand;
* flags are ``bool``, dtypes are dtypes, enums are the expected enum, and
  parameters the engine does not support (``accuracy``, shardings, ...) are
  ``None``.

Parameters of control flow and inlined calls that hold jaxprs or are never
bound (a ``jit``'s name, a ``custom_vjp``'s backward rule) are checked by the
parser and the evaluator, not here.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from gpuprivacy.oracle._rebuild_rules import _ENUMS, _STRUCTS, SCATTERS


class _Bad(Exception):
    """A parameter value the engine refuses; the caller names the primitive and the parameter."""


# A checker sees the parameter's value, the operands' (unbatched) shapes and dtypes, and all parameters.
_Checker = Callable[[object, list, list, dict], None]

# Integer parameters that only size code (an exponent, a permutation length) stay below this.
_INT32_MAX = 2**31 - 1


# --- value checks ---------------------------------------------------------------------------------

def _int(value, minimum: int = 0, maximum: int = _INT32_MAX, what: str = "an integer") -> int:
    # bool is a subclass of int; a True where an axis is expected is refused, not read as 1.
    if type(value) is not int or not minimum <= value <= maximum:
        raise _Bad(f"{what} must be a Python int in [{minimum}, {maximum}], got {value!r:.60}")
    return value


def _axis_value(value, rank: int) -> int:
    if rank == 0:
        raise _Bad(f"axis {value!r:.60} of a scalar operand")
    return _int(value, 0, rank - 1, "an axis")


def _axes_value(value, rank: int, *, increasing: bool = False) -> tuple:
    if not isinstance(value, tuple):
        raise _Bad(f"axes must be a tuple, got {value!r:.60}")
    for axis in value:
        _axis_value(axis, rank)
    if len(set(value)) != len(value):
        raise _Bad(f"duplicate axes {value!r:.60}")
    if increasing and list(value) != sorted(value):
        raise _Bad(f"axes {value!r:.60} must be increasing")
    return value


def _sizes_value(value, length: int | None = None) -> tuple:
    if not isinstance(value, tuple) or (length is not None and len(value) != length):
        raise _Bad(f"expected a tuple of {length if length is not None else 'some'} sizes, got {value!r:.60}")
    for size in value:
        _int(size, 0, _INT32_MAX, "a size")
    return value


def _rank(index: int) -> Callable[[list, dict], int]:
    return lambda shapes, params: len(shapes[index])


# --- checkers (factories return a checker) --------------------------------------------------------

def _any(value, shapes, dtypes, params) -> None:
    """Checked elsewhere (a jaxpr, a count the evaluator checks against its operands) or never bound."""


def _none(value, shapes, dtypes, params) -> None:
    # Shardings arrive as None or dropped (bound as None); ``accuracy`` is only supported at its
    # default, so the rebuilt program is the one the analyst's JAX would build.
    if value is not None:
        raise _Bad(f"only None is supported, got {value!r:.60}")


def _flag(value, shapes, dtypes, params) -> None:
    if not isinstance(value, bool):
        raise _Bad(f"expected a bool, got {value!r:.60}")


def _dtype(value, shapes, dtypes, params) -> None:
    if not isinstance(value, np.dtype):
        raise _Bad(f"expected a dtype, got {value!r:.60}")


def _integer_dtype(value, shapes, dtypes, params) -> None:
    if not isinstance(value, np.dtype) or value.kind not in "iu":
        raise _Bad(f"expected an integer dtype, got {value!r:.60}")


def _enum(name: str) -> _Checker:
    def check(value, shapes, dtypes, params):
        if not isinstance(value, _ENUMS[name]):
            raise _Bad(f"expected a {name}, got {value!r:.60}")
    return check


def _count(minimum: int = 0) -> _Checker:
    return lambda value, shapes, dtypes, params: _int(value, minimum, _INT32_MAX, "a count")


def _axis(rank: Callable[[list, dict], int] = _rank(0)) -> _Checker:
    return lambda value, shapes, dtypes, params: _axis_value(value, rank(shapes, params))


def _axes(rank: Callable[[list, dict], int] = _rank(0), *, increasing: bool = False,
          length: int | None = None) -> _Checker:
    def check(value, shapes, dtypes, params):
        _axes_value(value, rank(shapes, params), increasing=increasing)
        if length is not None and len(value) != length:
            raise _Bad(f"expected {length} axes, got {value!r:.60}")
    return check


def _permutation(value, shapes, dtypes, params) -> None:
    rank = len(shapes[0])
    _axes_value(value, rank)
    if len(value) != rank:
        raise _Bad(f"{value!r:.60} is not a permutation of range({rank})")


def _optional_permutation(value, shapes, dtypes, params) -> None:
    if value is not None:
        _permutation(value, shapes, dtypes, params)


def _shape(value, shapes, dtypes, params) -> None:
    _sizes_value(value)


def _broadcast_dimensions(value, shapes, dtypes, params) -> None:
    operand, out = shapes[0], params["shape"]  # ``shape`` is checked first (schema order)
    _axes_value(value, len(out), increasing=True)
    if len(value) != len(operand):
        raise _Bad(f"{len(value)} broadcast dimensions for an operand of rank {len(operand)}")
    if any(size not in (1, out[d]) for size, d in zip(operand, value)):
        raise _Bad(f"operand shape {operand} does not broadcast to {out} along {value}")


def _new_sizes(value, shapes, dtypes, params) -> None:
    _sizes_value(value)
    if math.prod(value) != math.prod(shapes[0]):
        raise _Bad(f"cannot reshape {shapes[0]} to {value!r:.60}")


def _squeeze_dimensions(value, shapes, dtypes, params) -> None:
    _axes_value(value, len(shapes[0]))
    if any(shapes[0][d] != 1 for d in value):
        raise _Bad(f"squeezed dimensions {value!r:.60} of shape {shapes[0]} are not all of size 1")


def _padding_config(value, shapes, dtypes, params) -> None:
    rank = len(shapes[0])
    if not isinstance(value, tuple) or len(value) != rank or not all(
            isinstance(t, tuple) and len(t) == 3 for t in value):
        raise _Bad(f"expected {rank} (low, high, interior) triples, got {value!r:.80}")
    for low, high, interior in value:
        # Negative low/high padding crops (lax.pad allows it); the declared output shape bounds the rest.
        _int(low, -_INT32_MAX, _INT32_MAX, "a low padding")
        _int(high, -_INT32_MAX, _INT32_MAX, "a high padding")
        _int(interior, 0, _INT32_MAX, "an interior padding")


def _slice_bounds(value, shapes, dtypes, params) -> None:
    # Checked once, on ``start_indices``, for the three slice parameters together.
    shape = shapes[0]
    starts = _sizes_value(value, len(shape))
    limits = _sizes_value(params["limit_indices"], len(shape))
    if any(not 0 <= s <= e <= n for s, e, n in zip(starts, limits, shape)):
        raise _Bad(f"slice [{starts}, {limits}) is not within shape {shape}")
    strides = params["strides"]
    if strides is not None:
        if not isinstance(strides, tuple) or len(strides) != len(shape):
            raise _Bad(f"expected {len(shape)} strides, got {strides!r:.60}")
        for stride in strides:
            _int(stride, 1, _INT32_MAX, "a stride")


def _slice_sizes(value, shapes, dtypes, params) -> None:
    operand = shapes[0]
    _sizes_value(value, len(operand))
    if any(size > n for size, n in zip(value, operand)):
        raise _Bad(f"slice sizes {value} exceed the operand shape {operand}")


def _split_sizes(value, shapes, dtypes, params) -> None:
    axis = _axis_value(params["axis"], len(shapes[0]))
    _sizes_value(value)
    if sum(value) != shapes[0][axis]:
        raise _Bad(f"split sizes {value!r:.60} do not sum to {shapes[0][axis]}, the size of axis {axis}")


def _iota_dimension(value, shapes, dtypes, params) -> None:
    _axis_value(value, len(params["shape"]))


def _top_k_k(value, shapes, dtypes, params) -> None:
    axis = _axis_value(params["axis"], len(shapes[0]))
    _int(value, 0, shapes[0][axis], "k")


def _num_keys(value, shapes, dtypes, params) -> None:
    _int(value, 1, len(shapes), "the number of keys")


def _precision_bits(field: str) -> _Checker:
    def check(value, shapes, dtypes, params):
        dtype = dtypes[0]
        if dtype.kind != "f":
            raise _Bad(f"reduce_precision of a non-float operand {dtype}")
        info = np.finfo(dtype)
        # More bits than the operand has are refused rather than passed to XLA: no honest use needs them.
        top = info.nexp if field == "exponent" else info.nmant
        _int(value, 1 if field == "exponent" else 0, top, f"{field} bits of {dtype}")
    return check


def _integer_pow_y(value, shapes, dtypes, params) -> None:
    # The lowering squares once per bit of |y|; the bound keeps the program small.
    _int(value, -_INT32_MAX, _INT32_MAX, "the exponent")


def _permutation_size(value, shapes, dtypes, params) -> None:
    pivots = shapes[0]
    if not pivots:
        raise _Bad("pivots must have rank >= 1")
    _int(value, pivots[-1], _INT32_MAX, "the permutation size")


def _fill_value(value, shapes, dtypes, params) -> None:
    if value is not None and type(value) not in (bool, int, float):
        raise _Bad(f"expected None or a scalar, got {value!r:.60}")


def _precision(value, shapes, dtypes, params) -> None:
    members = value if isinstance(value, tuple) else (value,)
    if len(members) not in (1, 2) or not all(m is None or isinstance(m, _ENUMS["Precision"]) for m in members):
        raise _Bad(f"expected None, a Precision or a pair of them, got {value!r:.60}")


def _optional_dtype(value, shapes, dtypes, params) -> None:
    if value is not None:
        _dtype(value, shapes, dtypes, params)


def _dot_dimension_numbers(value, shapes, dtypes, params) -> None:
    try:
        (lhs_contract, rhs_contract), (lhs_batch, rhs_batch) = value
    except (TypeError, ValueError):
        raise _Bad(f"malformed dimension numbers {value!r:.80}") from None
    for side, contract, batch in ((0, lhs_contract, lhs_batch), (1, rhs_contract, rhs_batch)):
        # Contracting and batch dimensions of one operand are distinct axes of that operand.
        _axes_value(_as_tuple(contract) + _as_tuple(batch), len(shapes[side]))
    if len(lhs_contract) != len(rhs_contract) or len(lhs_batch) != len(rhs_batch):
        raise _Bad(f"unpaired dimension numbers {value!r:.80}")


def _as_tuple(value) -> tuple:
    if not isinstance(value, tuple):
        raise _Bad(f"expected a tuple of axes, got {value!r:.60}")
    return value


def _indices_batch_rank(shapes: list) -> int:
    indices = shapes[1]
    if not indices:
        raise _Bad("indices must have rank >= 1 (the last dimension indexes the operand)")
    return len(indices) - 1


def _gather_dimension_numbers(value, shapes, dtypes, params) -> None:
    if not isinstance(value, _STRUCTS["GatherDimensionNumbers"]):
        raise _Bad(f"expected GatherDimensionNumbers, got {value!r:.80}")
    operand = len(shapes[0])
    offset_dims = _as_tuple(value.offset_dims)
    _axes_value(offset_dims, len(offset_dims) + _indices_batch_rank(shapes), increasing=True)
    _axes_value(value.collapsed_slice_dims, operand, increasing=True)
    _axes_value(value.start_index_map, operand)
    if value.operand_batching_dims or value.start_indices_batching_dims:
        raise _Bad("batching dimension numbers are not allowed")


def _scatter_dimension_numbers(value, shapes, dtypes, params) -> None:
    if not isinstance(value, _STRUCTS["ScatterDimensionNumbers"]):
        raise _Bad(f"expected ScatterDimensionNumbers, got {value!r:.80}")
    if len(shapes) != 3:
        raise _Bad("scatter takes 3 operands")
    _indices_batch_rank(shapes)
    _axes_value(value.update_window_dims, len(shapes[2]), increasing=True)
    _axes_value(value.inserted_window_dims, len(shapes[0]), increasing=True)
    _axes_value(value.scatter_dims_to_operand_dims, len(shapes[0]))
    if value.operand_batching_dims or value.scatter_indices_batching_dims:
        raise _Bad("batching dimension numbers are not allowed")


def _unroll(value, shapes, dtypes, params) -> None:
    if not isinstance(value, bool):
        _int(value, 0, _INT32_MAX, "unroll")


def _const_lengths(value, shapes, dtypes, params) -> None:
    names = {"matvec", "vecmat", "solve", "transpose_solve"}
    if not isinstance(value, dict) or set(value) != names:
        raise _Bad(f"expected lengths for {sorted(names)}")
    for length in value.values():
        _int(length, 0, _INT32_MAX, "a constant count")


# --- the schema -----------------------------------------------------------------------------------

_NO_PARAMS = """
add add_any sub div rem neg abs sign floor ceil pow square sinh cosh asin acos atan atan2 asinh acosh atanh
erf erfc erf_inv lgamma digamma is_finite max min nextafter clamp select_n eq ne lt le gt ge and or not xor
shift_left shift_right_logical shift_right_arithmetic population_count clz stop_gradient copy
dynamic_update_slice lu cholesky
""".split()
_WITH_ACCURACY = "exp exp2 log log1p expm1 sqrt rsqrt cbrt tanh logistic sin cos tan".split()
_CUMULATIVE = "cumsum cumprod cummax cummin cumlogsumexp".split()
_REDUCE = "reduce_max reduce_min reduce_prod reduce_and reduce_or reduce_xor".split()
_INLINED_SCHEMA = {
    "jit": ("jaxpr", "compiler_options_kvs", "ctx_mesh", "donated_invars", "in_layouts", "in_shardings", "inline",
            "keep_unused", "name", "out_layouts", "out_shardings"),
    "closed_call": ("call_jaxpr",),
    "remat2": ("jaxpr", "differentiated", "policy", "prevent_cse"),
    "custom_jvp_call": ("call_jaxpr", "jvp_jaxpr_fun", "num_consts", "symbolic_zeros"),
    "custom_vjp_call": ("call_jaxpr", "bwd", "fwd_jaxpr_thunk", "num_consts", "out_trees", "symbolic_zeros"),
}

#: Primitive name -> {parameter name: checker}, in checking order (a checker may read parameters
#: checked before it). The names are exactly those JAX 0.10.2 emits; see tests/oracle/test_rebuild_params.py.
PARAM_SCHEMA: dict[str, dict[str, _Checker]] = {
    **{name: {} for name in _NO_PARAMS},
    **{name: {"accuracy": _none} for name in _WITH_ACCURACY},
    "mul": {"out_dtype": _optional_dtype},
    "integer_pow": {"y": _integer_pow_y},
    "round": {"rounding_method": _enum("RoundingMethod")},
    "convert_element_type": {"new_dtype": _dtype, "weak_type": _flag, "sharding": _none},
    "bitcast_convert_type": {"new_dtype": _dtype},
    "reduce_precision": {"exponent_bits": _precision_bits("exponent"), "mantissa_bits": _precision_bits("mantissa")},
    # structure
    "broadcast_in_dim": {"shape": _shape, "broadcast_dimensions": _broadcast_dimensions, "sharding": _none},
    "reshape": {"new_sizes": _new_sizes, "dimensions": _optional_permutation, "sharding": _none},
    "squeeze": {"dimensions": _squeeze_dimensions},
    "transpose": {"permutation": _permutation},
    "rev": {"dimensions": _axes()},
    "concatenate": {"dimension": _axis()},
    "pad": {"padding_config": _padding_config},
    "slice": {"start_indices": _slice_bounds, "limit_indices": _any, "strides": _any},  # all three at once
    "dynamic_slice": {"slice_sizes": _slice_sizes},
    "gather": {"dimension_numbers": _gather_dimension_numbers, "slice_sizes": _slice_sizes,
               "indices_are_sorted": _flag, "unique_indices": _flag, "mode": _enum("GatherScatterMode"),
               "fill_value": _fill_value},
    "iota": {"dtype": _dtype, "shape": _shape, "dimension": _iota_dimension, "sharding": _none},
    "split": {"axis": _axis(), "sizes": _split_sizes},
    # reductions
    "reduce_sum": {"axes": _axes(), "out_sharding": _none},
    **{name: {"axes": _axes()} for name in _REDUCE},
    "argmax": {"axes": _axes(length=1), "index_dtype": _integer_dtype},
    "argmin": {"axes": _axes(length=1), "index_dtype": _integer_dtype},
    **{name: {"axis": _axis(), "reverse": _flag} for name in _CUMULATIVE},
    "sort": {"dimension": _axis(), "is_stable": _flag, "num_keys": _num_keys},
    "top_k": {"axis": _axis(), "k": _top_k_k},
    "dot_general": {"dimension_numbers": _dot_dimension_numbers, "precision": _precision,
                    "preferred_element_type": _optional_dtype, "out_sharding": _none},
    # linear algebra (batching rules treat leading dimensions as batch dimensions)
    "triangular_solve": {"left_side": _flag, "lower": _flag, "transpose_a": _flag, "conjugate_a": _flag,
                         "unit_diagonal": _flag},
    "lu_pivots_to_permutation": {"permutation_size": _permutation_size},
    # scatters: the update jaxpr is not bound (lax.scatter_* rebuild it engine-side)
    **{name: {"dimension_numbers": _scatter_dimension_numbers, "indices_are_sorted": _flag,
              "unique_indices": _flag, "mode": _enum("GatherScatterMode"), "update_jaxpr": _any,
              "update_consts": _any} for name in SCATTERS},
    # control flow: jaxprs are parsed, and counts checked against the operands, by the evaluator
    "cond": {"branches": _any},
    "while": {"cond_nconsts": _count(), "cond_jaxpr": _any, "body_nconsts": _count(), "body_jaxpr": _any},
    "scan": {"reverse": _flag, "length": _count(), "jaxpr": _any, "num_consts": _count(), "num_carry": _count(),
             "unroll": _unroll},
    "custom_linear_solve": {"const_lengths": _const_lengths, "jaxprs": _any},
    # inlined calls: only the body is run; the other parameters are never bound
    **{name: dict.fromkeys(keys, _any) for name, keys in _INLINED_SCHEMA.items()},
}


def check_param_names(name: str, params: dict, refuse: Callable[[str], Exception], where: str) -> None:
    """Refuses a parameter name the primitive does not have in JAX 0.10.2, or a missing one.

    Names are refused at parse time, before any value is read: an unknown name could be read by a
    future JAX's rule (or ignored by this one), so the tree may hold exactly the names JAX emits.
    """
    schema = PARAM_SCHEMA.get(name)
    if schema is None:
        raise refuse(f"{where}: primitive {name!r} has no parameter schema")
    for key in params:
        if key not in schema:
            raise refuse(f"{where}: primitive {name!r} has no parameter {key!r:.60}")
    missing = [key for key in schema if key not in params]
    if missing:
        raise refuse(f"{where}: primitive {name!r} is missing parameters {missing}")


def check_param_values(name: str, params: dict, operands: list, refuse: Callable[[str], Exception],
                       where: str) -> None:
    """Refuses a parameter value that is not valid for the UNBATCHED operands, before binding.

    Args:
      name: the primitive.
      params: its parameters, with dropped shardings already replaced by ``None``.
      operands: the operands (arrays or tracers) the primitive is about to be bound to; only their
        unbatched shapes and dtypes are read.
      refuse: builds the refusal.
      where: the equation's position in the tree, for the message.

    Raises:
      OracleRefused: (built by ``refuse``) naming the primitive and the parameter.
    """
    shapes = [tuple(np.shape(x)) for x in operands]
    dtypes = [np.dtype(x.dtype) for x in operands]  # arrays, tracers or parsed literals
    for key, check in PARAM_SCHEMA[name].items():
        try:
            check(params[key], shapes, dtypes, params)
        except _Bad as bad:
            raise refuse(f"{where}: primitive {name!r} parameter {key!r}: {bad}") from None
        except IndexError:  # a checker read an operand the equation does not have
            raise refuse(f"{where}: primitive {name!r} has too few operands ({len(operands)})") from None


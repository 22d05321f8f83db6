"""``gpuprivacy doctor``: what this machine offers the sandbox that runs analysts' oracles, and JAX's backend.

The facts come from :func:`gpuprivacy.oracle._confine.features` (the same
check the sandbox makes before it starts a worker); this command only prints
them. Untrusted oracles run confined by the kernel when nothing is missing;
otherwise the sandbox refuses them, unless ``GPUPRIVACY_ALLOW_UNCONFINED=1``
is set, in which case they run unconfined.
"""

from __future__ import annotations

import json
import os
import sys


def add_doctor_parser(subparsers) -> None:
    parser = subparsers.add_parser("doctor", help="which sandbox confinement features this machine offers "
                                                  "(Landlock, seccomp) and whether untrusted oracles can run")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=run_doctor)


def _yes(flag) -> str:
    return "yes" if flag else "no"


def _verdict(missing: list, allow_env: str) -> str:
    """``confined``, ``refused``, or ``unconfined`` (features missing and the opt-in set), as the sandbox decides."""
    if not missing:
        return "confined"
    return "unconfined" if os.environ.get(allow_env) == "1" else "refused"


_EMITTERS = {"loop": "loop (--xla_cpu_use_fusion_emitters=false, which importing gpuprivacy asks for; "
                     "GPUPRIVACY_XLA_DEFAULTS=1 keeps XLA's default)",
             "flags": "as your XLA_FLAGS say", "default": "XLA's default (fusion emitters)"}


def run_doctor(args) -> None:
    import jax

    from gpuprivacy._config import CPU_EMITTERS
    from gpuprivacy.oracle import ALLOW_UNCONFINED_ENV
    from gpuprivacy.oracle import sandbox_features as features

    found = features()
    missing = list(found.get("missing", []))
    verdict = _verdict(missing, ALLOW_UNCONFINED_ENV)
    backend = jax.default_backend()
    num_devices = len(jax.devices())
    if args.json:
        payload = {**found, "jax_version": jax.__version__, "backend": backend, "num_devices": num_devices,
                   "xla_cpu_emitters": CPU_EMITTERS, "untrusted_oracles": verdict}
        json.dump(payload, sys.stdout)
        sys.stdout.write("\n")
        return
    uid = found.get("uid")
    lines = [f"platform: {found.get('platform')}",
             f"machine: {found.get('machine')}",
             f"Landlock ABI: {found.get('landlock_abi')}",
             f"Landlock file system rules: {_yes(found.get('landlock_fs'))}",
             f"Landlock TCP rules: {_yes(found.get('landlock_net'))}",
             f"Landlock scopes (signals, abstract Unix sockets): {_yes(found.get('landlock_scopes'))}",
             f"seccomp filters: {_yes(found.get('seccomp'))}",
             f"no_new_privs: {_yes(found.get('no_new_privs'))}",
             f"running as uid {uid}" + (" (root is dropped to an unprivileged user namespace)" if uid == 0 else ""),
             f"jax {jax.__version__}: backend {backend}, {num_devices} device(s)",
             f"XLA:CPU emitters: {_EMITTERS[CPU_EMITTERS]}"]
    if verdict == "confined":
        lines.append("untrusted oracles: confined by the kernel")
    elif verdict == "refused":
        lines.append(f"untrusted oracles: REFUSED on this machine (missing: {'; '.join(missing)}); set "
                     f"{ALLOW_UNCONFINED_ENV}=1 to run them unconfined at your own risk")
    else:
        lines.append(f"untrusted oracles: run UNCONFINED ({ALLOW_UNCONFINED_ENV}=1 is set; missing: "
                     f"{'; '.join(missing)}): the analyst's code can read this user's files and memory")
    print("\n".join(lines))

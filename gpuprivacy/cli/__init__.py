"""The ``gpuprivacy`` command line."""

from gpuprivacy.cli._estimators import register_estimator as register_estimator
from gpuprivacy.cli._main import main as main
from gpuprivacy.cli._main import register_subcommand as register_subcommand

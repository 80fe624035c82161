"""The bridges' tests that train through TRL use the baselines' tiny model."""

from tests.baselines.conftest import tiny_model_dir

__all__ = ["tiny_model_dir"]

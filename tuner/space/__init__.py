"""Search spaces: schema, loading, rules, versioned knobs and rendering to engine launches."""

from tuner.space.load import load_space, settings_of
from tuner.space.render import render_engine_config
from tuner.space.schema import Space

__all__ = ["Space", "load_space", "render_engine_config", "settings_of"]

"""The lab's OmegaConf resolvers for DVC's own composition of conf/ into params.yaml.

DVC imports the modules under ``hydra_plugins/`` of the repository before it
composes conf/ (its Hydra ``plugins_path``), so ``${lab.runs:}`` resolves there
as it does in the stages, which register the same resolvers themselves.
"""
from pipeline.variants import register_resolvers

register_resolvers()

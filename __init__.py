"""reasonkit: distil reasoning models, one verified stage at a time.

Kept deliberately light: importing ``reasonkit`` must never import torch, vLLM or
transformers, so ``distill --help`` stays instant.
"""

__version__ = "0.1.0"

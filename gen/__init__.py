"""reasonkit.gen: teacher generation (``distill generate``).

Light on purpose: nothing here imports torch, vLLM, transformers or openai until used.

- ``gen.config``: ``GenerateConfig``; ``gen.settings``: the groups every model-holding stage shares (sampling,
  prompt, backend, tools), declared once
- ``gen.run``: ``generate(config, backend=None) -> manifest``, ``make_backend``
- ``gen.backend``: ``Request``, ``Sampling``, ``Completion``, the ``Backend`` protocol, ``derive_seed``
- ``gen.vllm_backend`` / ``gen.openai_backend`` / ``gen.hf_backend`` / ``gen.parallel``: the backends
- ``gen.render``: messages and chat templates (the ``<think>`` split is the spine's think.py)
- ``gen.command``: the click command ``generate``
"""

"""Each DVC stage's ``run(lab)``: the top floor of the library, one module per stage, named like it.

A stage's script (``stages/<name>.py``) hands Hydra's config to ``pipeline.stage.run_stage``, which applies a
variant, checks every setting and calls ``run`` with the checked settings (``pipeline.settings.Lab``). ``run``
reads what it needs from them, resolves the architecture once where it matters (``pipeline.architectures``)
and passes plain arguments, settings objects or the architecture's parts to the floors below; nothing below
reads the composed config.
"""

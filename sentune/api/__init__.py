"""sentune's Python API, each function in its module and importable from `sentune` itself: `sentune.evaluate`,
`sentune.train`, `sentune.adapt` (an `AdaptResult`), `sentune.Index`, `sentune.serve_app`; `sentune.encode`; the analysis
commands' functions (sentune.api.analysis) and the data and cache commands' (sentune.api.data); `sentune.whiten`, `flow`,
`fit_postprocessor` (sentune.api.postprocess), `paraphrase`, `ensemble`, `pipeline` (sentune.api.models), `export` and
`export_index` (sentune.api.export). The command line parses its options and calls these (sentune.cli)."""

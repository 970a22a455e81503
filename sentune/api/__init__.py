"""sentune's Python API, each function in its module and importable from `sentune` itself: `sentune.evaluate`,
`sentune.train`, `sentune.adapt` (an `AdaptResult`), `sentune.Index`, `sentune.serve_app`; `sentune.encode`; the analysis
commands' functions (sentune.api.analysis) and the data and cache commands' (sentune.api.data). The command line parses
its options and calls these (sentune.cli)."""

"""Search with what sentune adapts: BM25 as BEIR runs it (sentune.search.lexical), the fusion of a lexical and a dense
ranking (sentune.search.fusion), and an index a command can build, resume and search (sentune.search.build builds it, sentune.search.index reads it:
`sentune index` / `sentune search`)."""

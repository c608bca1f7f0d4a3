"""Renderers: each takes what one command's library call returned (an analysis's typed summary, a
summary dict, a result object or its tables) and writes it in one format: the terminal (Rich), JSON,
Markdown, HTML, JUnit XML or a Chrome trace. No renderer opens an input file itself."""

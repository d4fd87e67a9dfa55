//! The Python client's synchronous calls (`_sync_ops.py`), generated from its asynchronous ones
//! (`_ops.py`, the source both clients share) by taking out `async` and `await` — the
//! "unasync" way httpcore keeps its two clients in step.

/// `source` (the text of `_ops.py`) with `async`/`await` taken out and `AsyncOps` renamed
/// `SyncOps`, under `header` and a docstring of its own.
pub fn generate(source: &str, header: &str) -> anyhow::Result<String> {
    // The source's module docstring is about the source; the generated file says what it is.
    let body = source
        .strip_prefix("\"\"\"")
        .and_then(|rest| rest.split_once("\"\"\"\n"))
        .map(|(_, body)| body)
        .ok_or_else(|| anyhow::anyhow!("_ops.py does not open with its docstring"))?;
    let mut out = String::new();
    for line in header.lines() {
        out.push_str("# ");
        out.push_str(line);
        out.push('\n');
    }
    out.push_str(
        "\n\"\"\"The calls of the v1 API for the synchronous `Client`: `_ops.py` without `async`/`await`.\"\"\"\n",
    );
    let body = body
        .replace("AsyncOps", "SyncOps")
        .replace("AsyncIterator", "Iterator")
        .replace("async def ", "def ")
        .replace("async for ", "for ")
        .replace("async with ", "with ")
        .replace("await ", "");
    anyhow::ensure!(
        !body.contains("async") && !body.contains("await"),
        "_ops.py uses async in a way the generator does not take out"
    );
    out.push_str(&body);
    Ok(out)
}

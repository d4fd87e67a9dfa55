//! `cargo run -p delayq-codegen`: writes the clients' wire types from the OpenAPI document of
//! this build; `-- --check` only says which committed files are stale (exit 1).

use anyhow::Context as _;

fn main() -> anyhow::Result<()> {
    let check = std::env::args().any(|a| a == "--check");
    if check {
        let stale = delayq_codegen::stale()?;
        if stale.is_empty() {
            println!("the generated files are fresh");
            return Ok(());
        }
        anyhow::bail!(
            "stale (run `cargo run -p delayq-codegen`): {}",
            stale.join(", ")
        );
    }
    let root = delayq_codegen::repo_root();
    for (path, text) in delayq_codegen::generate_current()? {
        let file = root.join(path);
        std::fs::create_dir_all(file.parent().context("a file's folder")?)?;
        std::fs::write(&file, text).with_context(|| format!("writing {path}"))?;
        println!("wrote {path}");
    }
    Ok(())
}

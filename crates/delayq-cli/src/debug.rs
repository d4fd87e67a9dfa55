//! `delayq debug`: what this build would send a store, for people reading it and for the
//! test that the scripts the tests load are the scripts that ship (scripts/test compares
//! `delayq debug scripts --sha1` of the shipped build with the committed SHA1SUMS).

use std::io::Write as _;
use std::path::PathBuf;

use clap::Subcommand;

/// `delayq debug …`.
#[derive(Subcommand, Debug)]
pub(crate) enum DebugCommand {
    /// The Redis scripts as this build sends them (the text of lua/built/ in the source tree).
    Scripts {
        /// One line per script: the SHA1 of its one-server build, of its Cluster build, and
        /// its file (the format of lua/built/SHA1SUMS).
        #[arg(long, conflicts_with_all = ["write", "file"])]
        sha1: bool,
        /// Write every script's text and SHA1SUMS into this directory.
        #[arg(long, value_name = "DIR", conflicts_with = "file")]
        write: Option<PathBuf>,
        /// Print one script's whole text (e.g. `claim.lua`); without it, list the scripts.
        file: Option<String>,
    },
}

/// Runs a `delayq debug` command.
pub(crate) fn run(cmd: &DebugCommand) -> anyhow::Result<u8> {
    let DebugCommand::Scripts { sha1, write, file } = cmd;
    let scripts = delayq_redis::scripts();
    let sums = delayq_redis::sha1sums(&scripts);
    let mut out = std::io::stdout().lock();
    if let Some(dir) = write {
        std::fs::create_dir_all(dir)?;
        for s in &scripts {
            std::fs::write(dir.join(s.file), &s.text)?;
        }
        std::fs::write(dir.join("SHA1SUMS"), &sums)?;
        writeln!(
            out,
            "{} scripts written to {}",
            scripts.len(),
            dir.display()
        )?;
    } else if *sha1 {
        out.write_all(sums.as_bytes())?;
    } else if let Some(name) = file {
        match scripts
            .iter()
            .find(|s| s.file == name || s.file == format!("{name}.lua"))
        {
            Some(s) => out.write_all(s.text.as_bytes())?,
            None => {
                let names: Vec<&str> = scripts.iter().map(|s| s.file).collect();
                anyhow::bail!("no script {name}; the scripts: {}", names.join(", "));
            }
        }
    } else {
        for s in &scripts {
            writeln!(out, "{}  {} lines", s.file, s.text.lines().count())?;
        }
    }
    Ok(0)
}

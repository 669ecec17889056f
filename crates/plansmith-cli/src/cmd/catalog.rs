use std::path::PathBuf;

use clap::Subcommand;
use plansmith_core::Catalog;
use serde_json::json;

use crate::Outcome;

#[derive(Subcommand)]
pub enum CatalogCommand {
    /// Import a catalog and report its tool count, hash and detected format.
    Check {
        /// Catalog file (OpenAI, MCP, Anthropic, BFCL or xLAM form).
        file: PathBuf,
        /// Print `{"tools", "hash", "format"}` as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print the catalog in canonical JSON (`[{name, description, parameters}]`).
    Show { file: PathBuf },
}

pub fn load(file: &PathBuf) -> anyhow::Result<Catalog> {
    Catalog::from_file(file).map_err(|e| match e {
        plansmith_core::CatalogError::Io { .. } => anyhow::Error::new(e),
        other => anyhow::Error::new(other).context(format!("in catalog {}", file.display())),
    })
}

pub fn run(command: CatalogCommand) -> anyhow::Result<Outcome> {
    match command {
        CatalogCommand::Check { file, json } => {
            let catalog = load(&file)?;
            if json {
                println!(
                    "{}",
                    json!({"tools": catalog.len(), "hash": catalog.hash(), "format": catalog.format.as_str()})
                );
            } else {
                println!(
                    "{}: {} tools, format {}",
                    file.display(),
                    catalog.len(),
                    catalog.format.as_str()
                );
                println!("hash {}", catalog.hash());
                for tool in &catalog.tools {
                    println!("  {:<16} {}", tool.name, tool.description);
                }
            }
        }
        CatalogCommand::Show { file } => {
            let catalog = load(&file)?;
            println!(
                "{}",
                serde_json::to_string_pretty(&catalog.to_canonical_json())?
            );
        }
    }
    Ok(Outcome::Ok)
}

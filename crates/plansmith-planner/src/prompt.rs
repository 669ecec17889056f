//! Prompt rendering for tiny planners: `request + "\n=> "`, with the catalog in front for
//! tools-in-prompt planners (its compact line, or a line per tool with its description).

use plansmith_core::Catalog;

use crate::settings::PlannerSettings;

/// How much of the catalog a prompt carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CatalogText {
    /// None: the planner learnt its catalog (the Pace default before tools-in-prompt).
    Absent,
    /// `tools: open(target) set(target, value)`.
    Signatures,
    /// A line per tool: signature and the first sentence of its description.
    Described,
    /// `tools: t0=open(target) t1=set(target, value)`: signatures behind the pointers the
    /// planner calls them by ([`crate::pointers`]).
    Pointers,
}

impl CatalogText {
    pub fn of(settings: &PlannerSettings) -> CatalogText {
        match (
            settings.tools_in_prompt,
            settings.tool_pointers,
            settings.tool_descriptions,
        ) {
            (false, _, _) => CatalogText::Absent,
            (true, true, _) => CatalogText::Pointers,
            (true, false, false) => CatalogText::Signatures,
            (true, false, true) => CatalogText::Described,
        }
    }
}

/// The separator between request and completion (mixle's format).
pub const ARROW: &str = "\n=> ";

/// The part of the prompt shared by every request against `catalog` (cached as a KV prefix).
pub fn prefix(catalog: &Catalog, text: CatalogText) -> String {
    match text {
        CatalogText::Absent => String::new(),
        CatalogText::Signatures => format!("{}\n", catalog.compact_line()),
        CatalogText::Described => format!("{}\n", catalog.described_lines()),
        CatalogText::Pointers => format!("{}\n", crate::pointers::signatures_line(catalog)),
    }
}

/// Requests are one line: newlines become spaces (a newline ends a DSL completion).
pub fn clean_request(request: &str) -> String {
    request
        .split(['\n', '\r'])
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn render(catalog: &Catalog, text: CatalogText, request: &str) -> String {
    format!("{}{}{ARROW}", prefix(catalog, text), clean_request(request))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompts_carry_as_much_of_the_catalog_as_the_planner_reads() {
        let catalog = Catalog::from_json_str(
            r#"[{"name":"wait","description":"Pause until an event happens. Or a time passes.",
                 "parameters":{"type":"object","properties":{"condition":{"type":"string"}},"required":["condition"]}}]"#,
        )
        .unwrap();
        let mut settings = PlannerSettings::dsl();
        let request = "hold on\nuntil 5 pm ";
        assert_eq!(CatalogText::of(&settings), CatalogText::Absent);
        assert_eq!(
            render(&catalog, CatalogText::of(&settings), request),
            "hold on until 5 pm\n=> "
        );
        settings.tools_in_prompt = true;
        assert_eq!(
            render(&catalog, CatalogText::of(&settings), request),
            "tools: wait(condition)\nhold on until 5 pm\n=> "
        );
        settings.tool_descriptions = true;
        assert_eq!(
            render(&catalog, CatalogText::of(&settings), request),
            "tools:\nwait(condition) Pause until an event happens.\nhold on until 5 pm\n=> "
        );
        settings.tool_pointers = true;
        assert_eq!(
            render(&catalog, CatalogText::of(&settings), request),
            "tools: t0=wait(condition)\nhold on until 5 pm\n=> "
        );
        // Planners saved before descriptions existed read as signatures-only.
        let mut old = serde_json::to_value(PlannerSettings::dsl()).unwrap();
        old.as_object_mut().unwrap().remove("tool_descriptions");
        old.as_object_mut().unwrap().remove("tool_pointers");
        old.as_object_mut().unwrap().remove("name_prior");
        let old: PlannerSettings = serde_json::from_value(old).unwrap();
        assert!(!old.tool_descriptions);
        assert!(!old.tool_pointers);
        assert_eq!(old.name_prior, 0.0);
    }
}

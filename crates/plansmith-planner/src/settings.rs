//! What a planner persists besides its model: the settings that shape decoding and gating,
//! and what it knows about how it was made. Plain data, shared by the planner loop, prompt
//! building, the planner directory and training.

use plansmith_core::{Policy, Syntax};
use plansmith_llama::ToolList;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::calibrate::GateMetrics;

/// Which tokens the confidence averages over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum ConfidenceMode {
    /// Every completion token, forced ones included (mixle's choice).
    AllTokens,
    /// Only the tokens the model chose among several allowed ones.
    #[default]
    ChosenTokens,
    /// The least likely reply token, forced ones included: one doubtful choice (a wrong entity
    /// type in an otherwise certain plan) is not averaged away by the certain ones.
    WeakestToken,
}

/// Settings that shape decoding and gating (persisted in `planner.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannerSettings {
    pub syntax: Syntax,
    pub policy: Policy,
    /// The catalog's compact line is part of the prompt (the planner reads tools at run time).
    pub tools_in_prompt: bool,
    /// With `tools_in_prompt`: each tool's description is in the prompt too (a line per tool).
    /// What lets a planner match a request to a tool it never saw by the tool's words.
    #[serde(default)]
    pub tool_descriptions: bool,
    /// With `tools_in_prompt`: the planner calls tools by their place in the prompt's catalog
    /// (`t3`, [`crate::pointers`]), not by name; descriptions are left out.
    #[serde(default)]
    pub tool_pointers: bool,
    /// Plans with confidence (mean log-prob) below this escalate.
    pub conf_floor: f32,
    #[serde(default)]
    pub confidence: ConfidenceMode,
    pub max_calls: usize,
    /// The reply's end, where the model chose it over going on (after its last call), counts
    /// in the confidence like any other choice: a plan that stops after one call while the
    /// model leaned towards a second is doubted. Absent (false) in planners calibrated before
    /// it, whose floors were fitted without that step; `calibrate` turns it on as it refits.
    #[serde(default)]
    pub end_scored: bool,
    /// Weight of the name-prior correction on the first call's tool name ([`crate::prior`]);
    /// 0 decodes greedily on the model's own scores. DSL planners with tools in the prompt only.
    #[serde(default)]
    pub name_prior: f32,
    /// Pretrained planners with plansmith's JSON-array prompt: how its system message lists
    /// the tools (full JSON per tool, or the compact form in about half the tokens). The
    /// adapter learnt one; planning must use the same.
    #[serde(default, skip_serializing_if = "is_json_list")]
    pub tool_list: ToolList,
}

fn is_json_list(list: &ToolList) -> bool {
    *list == ToolList::Json
}

impl PlannerSettings {
    /// A plan-DSL planner with the DSL's copy policy, the catalog in the weights, no floor
    /// yet (training fits it), confidence over chosen tokens, up to 4 calls.
    pub fn dsl() -> Self {
        PlannerSettings {
            syntax: Syntax::Dsl,
            policy: Policy::copy_free_strings(),
            tools_in_prompt: false,
            tool_descriptions: false,
            tool_pointers: false,
            conf_floor: f32::MIN,
            confidence: ConfidenceMode::ChosenTokens,
            max_calls: 4,
            end_scored: true,
            name_prior: 0.0,
            tool_list: ToolList::Json,
        }
    }

    /// A pretrained chat model: tools in the system prompt, a JSON array of calls out, no
    /// copy constraint (chat models paraphrase values legitimately), no floor until one is
    /// calibrated, up to 8 parallel calls.
    pub fn chat() -> Self {
        PlannerSettings {
            syntax: Syntax::JsonArray,
            policy: Policy::default(),
            tools_in_prompt: true,
            tool_descriptions: false,
            tool_pointers: false,
            conf_floor: f32::MIN,
            confidence: ConfidenceMode::ChosenTokens,
            max_calls: 8,
            end_scored: true,
            name_prior: 0.0,
            tool_list: ToolList::Json,
        }
    }
}

/// What a planner knows about how it was made and how well it did.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct PlannerMeta {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration: Option<GateMetrics>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test: Option<GateMetrics>,
    /// How the floor was chosen and what it certifies (absent in planners made before rules).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub floor_fit: Option<crate::guarantee::FloorFit>,
    #[serde(default)]
    pub training: Value,
}

//! A process's part in an Ollama installation: the role a process record carries, and the one rule that
//! tells it from a command line (Older releases start runners as `ollama runner [--ollama-engine] --model P
//! --port N`; newer ones as `llama-server --model P --port N ...` from `lib/ollama/`. Discovery runs the same
//! programs without `--model`: those are not runners).

use serde::{Deserialize, Serialize};

use crate::os::basename;

/// A process's part in an Ollama installation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// `ollama serve`.
    OllamaServer,
    /// A model runner (`ollama runner`, or `llama-server` started by Ollama).
    Runner,
    /// A value this build does not know (a trace from a later build).
    #[serde(other)]
    Unknown,
}

impl Role {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::OllamaServer => "ollama-server",
            Self::Runner => "runner",
            Self::Unknown => "unknown",
        }
    }
}

/// What a process is to Ollama, as its argv says (recorded as its [`Role`], with the runner's model).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum OllamaPart {
    Server,
    Runner { model: Option<String> },
    Other,
}

impl OllamaPart {
    /// The role a trace's process record carries, with the runner's model.
    pub(crate) fn recorded(self) -> (Option<Role>, Option<String>) {
        match self {
            Self::Server => (Some(Role::OllamaServer), None),
            Self::Runner { model } => (Some(Role::Runner), model),
            Self::Other => (None, None),
        }
    }
}

/// The role argv gives a process. A `llama-server` is a runner when it is given a model: Ollama's GPU
/// discovery starts `llama-server --list-devices` and `llama-server --port N` without one
/// (`discover/llama_server.go`), short-lived children that load the backends and serve no model.
pub(crate) fn ollama_part(argv: &[String]) -> OllamaPart {
    let Some(prog) = argv.first().map(|a| basename(a)) else { return OllamaPart::Other };
    let model = argv.iter().position(|a| a == "--model" || a == "-m").and_then(|i| argv.get(i + 1)).cloned();
    let model = model.or_else(|| argv.iter().find_map(|a| a.strip_prefix("--model=").map(str::to_owned)));
    match (prog, argv.get(1).map(String::as_str)) {
        ("ollama", Some("serve")) => OllamaPart::Server,
        ("ollama", Some("runner")) => OllamaPart::Runner { model },
        (p, _) if p.starts_with("llama-server") && model.is_some() && !argv.iter().any(|a| a == "--list-devices") => {
            OllamaPart::Runner { model }
        }
        _ => OllamaPart::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::{OllamaPart, ollama_part};

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn parts_from_argv() {
        assert_eq!(ollama_part(&argv("/usr/bin/ollama serve")), OllamaPart::Server);
        assert_eq!(
            ollama_part(&argv("/usr/bin/ollama runner --ollama-engine --model /m/blobs/sha256-ab --port 40001")),
            OllamaPart::Runner { model: Some("/m/blobs/sha256-ab".into()) }
        );
        assert_eq!(
            ollama_part(&argv("ollama runner --ollama-engine --port 40001")),
            OllamaPart::Runner { model: None }
        );
        assert_eq!(
            ollama_part(&argv("/usr/lib/ollama/llama-server --model /m/x.gguf --port 5 --host 127.0.0.1")),
            OllamaPart::Runner { model: Some("/m/x.gguf".into()) }
        );
        assert_eq!(
            ollama_part(&argv("llama-server --model=/m/y.gguf")),
            OllamaPart::Runner { model: Some("/m/y.gguf".into()) }
        );
        assert_eq!(ollama_part(&argv("/bin/bash -c ollama")), OllamaPart::Other);
        // Ollama's discovery children: no model, or a device listing.
        assert_eq!(
            ollama_part(&argv("/usr/lib/ollama/llama-server --list-devices --offline --verbose")),
            OllamaPart::Other
        );
        assert_eq!(
            ollama_part(&argv("/usr/lib/ollama/llama-server --port 5 --host 127.0.0.1 --no-webui")),
            OllamaPart::Other
        );
        assert_eq!(ollama_part(&argv("llama-server --model /m/x.gguf --list-devices")), OllamaPart::Other);
        assert_eq!(ollama_part(&[]), OllamaPart::Other);
    }
}

//! [`FormError`]: how the server functions of forms say what went wrong, the whole
//! form's message and, where a field is at fault, that field's. Shared by both sides:
//! the browser shows it next to the fields.

use leptos::server_fn::codec::JsonEncoding;
use leptos::server_fn::error::{FromServerFnError, ServerFnErrorErr};
use serde::{Deserialize, Serialize};

/// Why a visitor's form was not taken: a message for the whole form and, where a
/// field is at fault, a message for that field. Sent with a 4xx status.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FormError {
    pub message: String,
    pub name: Option<String>,
    pub email: Option<String>,
    pub text: Option<String>,
}

impl FormError {
    pub fn new(message: impl Into<String>) -> Self {
        FormError {
            message: message.into(),
            ..Default::default()
        }
    }
}

impl std::fmt::Display for FormError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl FromServerFnError for FormError {
    type Encoder = JsonEncoding;

    fn from_server_fn_error(value: ServerFnErrorErr) -> Self {
        match value {
            ServerFnErrorErr::ServerError(message) => FormError::new(message),
            ServerFnErrorErr::Args(detail)
            | ServerFnErrorErr::Deserialization(detail)
            | ServerFnErrorErr::MissingArg(detail) => {
                FormError::new(format!("{}{detail}", super::ARGUMENTS_DO_NOT_FIT))
            }
            _ => FormError::new("StandMeet did not answer; try again."),
        }
    }
}

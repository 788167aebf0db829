//! `serde_defaults!`: the functions `#[serde(default = "...")]` names, each returning a stage's
//! `DEFAULT_*` constant. serde takes a function there, not a value; only tables with required
//! keys (paths) need these, the others are `#[serde(default)]` as a whole.

/// `name: Type = CONSTANT;` declares `fn name() -> Type { CONSTANT }`.
macro_rules! serde_defaults {
    ($($name:ident: $ty:ty = $value:expr;)*) => {
        $(fn $name() -> $ty { $value })*
    };
}

//! The Rust/Lua boundary, declared once per script. A script's declaration ([`script!`]) names
//! its file, its KEYS, its variable-length key tails, its ARGV by name and type, an argument
//! tail of items and its reply type (the helpers it calls are read from its text); from it come both sides: the Lua
//! header of locals the script's own text starts from, and the Rust encoder (the script's
//! `Args`) and decoder ([`FromReply`]). A reply's declaration ([`reply!`]) gives its Rust
//! type, its decoder and the Lua function that builds it. No position is written by hand.
//!
//! The wire form, generated on both sides: `ARGV` holds the count of each key tail, then the
//! named arguments, then the tail's items (each item's fields in order) to the end; `KEYS`
//! holds the declared keys, then each key tail in order.

use std::fmt::Write;

use delayq::{JobId, Result};
use redis::Value;

use crate::error::shape;
use crate::reply::Reply;

/// One value of a script's `ARGV`: how Rust writes it and how the script reads it.
pub(crate) trait Arg {
    /// The Lua expression that reads it, with `@` standing for its `ARGV[i]`.
    const LUA: &'static str;
    /// Appends its encoding.
    fn put(self, out: &mut Vec<Vec<u8>>);
}

macro_rules! int_arg {
    ($($t:ty),*) => {$(
        impl Arg for $t {
            const LUA: &'static str = "tonumber(@)";
            fn put(self, out: &mut Vec<Vec<u8>>) {
                out.push(self.to_string().into_bytes());
            }
        }
    )*};
}
int_arg!(u8, u16, u32, u64, i64, usize, f64);

impl Arg for bool {
    const LUA: &'static str = "(@ == '1')";
    fn put(self, out: &mut Vec<Vec<u8>>) {
        out.push(if self { b"1".to_vec() } else { b"0".to_vec() });
    }
}

impl Arg for Vec<u8> {
    const LUA: &'static str = "@";
    fn put(self, out: &mut Vec<Vec<u8>>) {
        out.push(self);
    }
}

impl Arg for String {
    const LUA: &'static str = "@";
    fn put(self, out: &mut Vec<Vec<u8>>) {
        out.push(self.into_bytes());
    }
}

impl Arg for JobId {
    const LUA: &'static str = "@";
    fn put(self, out: &mut Vec<Vec<u8>>) {
        out.push(self.as_str().as_bytes().to_vec());
    }
}

/// A script's arguments as it is called: the extra keys after its declared ones and `ARGV`.
pub(crate) trait Encode {
    /// The key tails (in order) and the whole `ARGV`.
    fn encode(self) -> (Vec<String>, Vec<Vec<u8>>);
}

/// A script's reply (or a part of one) read from the server's answer.
pub(crate) trait FromReply: Sized {
    /// Reads it.
    fn from_reply(v: Value) -> Result<Self>;
    /// Appends the Lua functions that build it (and its parts) for a script's header.
    fn lua(_out: &mut String) {}
}

impl FromReply for i64 {
    fn from_reply(v: Value) -> Result<Self> {
        crate::reply::int(&v)
    }
}

impl FromReply for u64 {
    fn from_reply(v: Value) -> Result<Self> {
        let n = crate::reply::int(&v)?;
        u64::try_from(n).map_err(|_| shape("a count below 0"))
    }
}

impl FromReply for bool {
    fn from_reply(v: Value) -> Result<Self> {
        Ok(crate::reply::int(&v)? == 1)
    }
}

impl FromReply for Reply {
    fn from_reply(v: Value) -> Result<Self> {
        crate::reply::reply(&v)
    }
}

impl FromReply for Vec<u8> {
    fn from_reply(v: Value) -> Result<Self> {
        crate::reply::bytes(v)
    }
}

impl FromReply for JobId {
    fn from_reply(v: Value) -> Result<Self> {
        crate::reply::job_id(v)
    }
}

impl<T: FromReply> FromReply for Vec<T> {
    fn from_reply(v: Value) -> Result<Self> {
        crate::reply::array(v)?
            .into_iter()
            .map(T::from_reply)
            .collect()
    }
    fn lua(out: &mut String) {
        T::lua(out);
    }
}

/// `false` in Lua (nil in the reply) is `None`.
impl<T: FromReply> FromReply for Option<T> {
    fn from_reply(v: Value) -> Result<Self> {
        match v {
            Value::Nil => Ok(None),
            v => T::from_reply(v).map(Some),
        }
    }
    fn lua(out: &mut String) {
        T::lua(out);
    }
}

/// A reply declared by [`reply!`] whose fields a flat list carries one after another ([`Flat`]).
pub(crate) trait Fields: Sized {
    /// Values per item.
    const WIDTH: usize;
    /// Reads one item from the next [`Self::WIDTH`] values.
    fn from_fields(it: &mut std::vec::IntoIter<Value>) -> Result<Self>;
    /// Appends the Lua function that pushes one item's fields onto a list.
    fn lua(out: &mut String);
}

/// A list of items written flat (each item's fields one after another: one Lua table for the
/// whole list, not one per item).
#[derive(Debug)]
pub(crate) struct Flat<T>(pub Vec<T>);

impl<T: Fields> FromReply for Flat<T> {
    fn from_reply(v: Value) -> Result<Self> {
        let all = crate::reply::array(v)?;
        if all.len() % T::WIDTH != 0 {
            return Err(shape(&format!("{} values per item expected", T::WIDTH)));
        }
        let mut out = Vec::with_capacity(all.len() / T::WIDTH);
        let mut it = all.into_iter();
        while it.len() > 0 {
            out.push(T::from_fields(&mut it)?);
        }
        Ok(Flat(out))
    }
    fn lua(out: &mut String) {
        T::lua(out);
    }
}

/// The next value of a flat list or a reply's array.
pub(crate) fn next_value(it: &mut std::vec::IntoIter<Value>, what: &str) -> Result<Value> {
    it.next()
        .ok_or_else(|| shape(&format!("{what}: too few values")))
}

/// One item of a script's argument tail, declared by [`item!`].
pub(crate) trait Item {
    /// Its fields: (name, how the script reads it).
    fn fields() -> Vec<(&'static str, &'static str)>;
    /// Appends its fields' encodings, in order.
    fn put(self, out: &mut Vec<Vec<u8>>);
}

/// Declares an item of an argument tail: a struct whose fields are written in order; the
/// script reads field F of item i as `TAIL_F[i]`.
macro_rules! item {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident { $($(#[$fmeta:meta])* $field:ident : $ty:ty),+ $(,)? }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone)]
        $vis struct $name { $($(#[$fmeta])* pub $field: $ty),+ }

        impl $crate::protocol::Item for $name {
            fn fields() -> Vec<(&'static str, &'static str)> {
                vec![$((stringify!($field), <$ty as $crate::protocol::Arg>::LUA)),+]
            }
            fn put(self, out: &mut Vec<Vec<u8>>) {
                $($crate::protocol::Arg::put(self.$field, out);)+
            }
        }
    };
}
pub(crate) use item;

/// Declares a reply: its Rust type, its decoder and the Lua function that builds it.
///
/// - `struct NAME as "lua_fn" { field: Type, … }`: an array of the fields in order; the script
///   returns `lua_fn{ field = …, … }`.
/// - `impl PATH as "lua_fn" { field: Type, … }`: the same, read into a type declared
///   elsewhere (every field of it, in the reply's order).
/// - `flat struct NAME as "lua_fn" { … }`: an item of a [`Flat`] list; the script appends one
///   with `lua_fn(list, field, …)` (the parameters named as the fields).
macro_rules! reply {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident as $lua:literal { $($(#[$fmeta:meta])* $field:ident : $ty:ty),+ $(,)? }
    ) => {
        $(#[$meta])*
        #[derive(Debug)]
        $vis struct $name { $($(#[$fmeta])* pub $field: $ty),+ }

        $crate::protocol::reply!(impl $name as $lua { $($field: $ty),+ });
    };
    // A reply read straight into a type declared elsewhere (a core type whose fields are the
    // reply's, in order): no copy of the type, no conversion.
    (impl $name:path as $lua:literal { $($field:ident : $ty:ty),+ $(,)? }) => {
        impl $crate::protocol::FromReply for $name {
            fn from_reply(v: redis::Value) -> delayq::Result<Self> {
                let what = stringify!($name);
                let all = $crate::reply::array(v)?;
                let want = [$(stringify!($field)),+].len();
                if all.len() != want {
                    return Err($crate::error::shape(&format!("{what}: {want} values expected")));
                }
                let mut it = all.into_iter();
                Ok(Self { $($field: <$ty as $crate::protocol::FromReply>::from_reply(
                    $crate::protocol::next_value(&mut it, what)?)?),+ })
            }
            fn lua(out: &mut String) {
                $(<$ty as $crate::protocol::FromReply>::lua(out);)+
                let fields = [$(concat!("t.", stringify!($field))),+];
                $crate::protocol::define_lua(out, $lua, "t", &format!("{{ {} }}", fields.join(", ")));
            }
        }
    };
    (
        $(#[$meta:meta])*
        $vis:vis flat struct $name:ident as $lua:literal { $($(#[$fmeta:meta])* $field:ident : $ty:ty),+ $(,)? }
    ) => {
        $(#[$meta])*
        #[derive(Debug)]
        $vis struct $name { $($(#[$fmeta])* pub $field: $ty),+ }

        impl $crate::protocol::Fields for $name {
            const WIDTH: usize = [$(stringify!($field)),+].len();
            fn from_fields(it: &mut std::vec::IntoIter<redis::Value>) -> delayq::Result<Self> {
                let what = stringify!($name);
                Ok($name { $($field: <$ty as $crate::protocol::FromReply>::from_reply(
                    $crate::protocol::next_value(it, what)?)?),+ })
            }
            fn lua(out: &mut String) {
                let fields = [$(stringify!($field)),+];
                let mut body = String::new();
                for f in fields {
                    body.push_str(&format!("list[#list + 1] = {f} "));
                }
                $crate::protocol::define_lua(
                    out,
                    $lua,
                    &format!("list, {}", fields.join(", ")),
                    body.trim_end(),
                );
            }
        }
    };
}
pub(crate) use reply;

/// Appends `local function NAME(PARAMS) return BODY end` (or BODY as statements when it
/// does not start with `{`), once.
pub(crate) fn define_lua(out: &mut String, name: &str, params: &str, body: &str) {
    let head = format!("local function {name}(");
    if out.contains(&head) {
        return;
    }
    if body.starts_with('{') {
        let _ = writeln!(out, "{head}{params}) return {body} end");
    } else {
        let _ = writeln!(out, "{head}{params}) {body} end");
    }
}

/// The Lua header of a script, built from its declaration.
pub(crate) struct Header {
    text: String,
    keys: usize,
    argv: usize,
    key_tails: Vec<&'static str>,
}

impl Header {
    /// An empty header for `file`. The first argument of every script is the offset (µs)
    /// it adds to the server's clock: 0 in production, a test clock's offset in tests — the
    /// same text either way (the scripts the tests load are the scripts that ship).
    pub(crate) fn new(file: &str) -> Self {
        let mut h = Header {
            text: format!("-- {file}: header generated from its declaration in Rust\n"),
            keys: 0,
            argv: 0,
            key_tails: Vec::new(),
        };
        h.arg("clock_offset_us", "tonumber(@)");
        h
    }

    /// The next declared key, as a local named `name`.
    pub(crate) fn key(&mut self, name: &str) {
        self.keys += 1;
        let _ = writeln!(self.text, "local {name} = KEYS[{}]", self.keys);
    }

    /// A key tail (after the declared keys and the tails before it), its length in `ARGV`.
    pub(crate) fn key_tail(&mut self, name: &'static str) {
        self.argv += 1;
        let _ = writeln!(self.text, "local {name}_n = tonumber(ARGV[{}])", self.argv);
        let start = match self.key_tails.last() {
            None => (self.keys + 1).to_string(),
            Some(prev) => format!("{prev}_at + {prev}_n"),
        };
        let _ = writeln!(
            self.text,
            "local {name}_at = {start} -- {name}: KEYS[{name}_at] .. KEYS[{name}_at + {name}_n - 1]"
        );
        self.key_tails.push(name);
    }

    /// The next named argument, read as `lua` says.
    pub(crate) fn arg(&mut self, name: &str, lua: &str) {
        self.argv += 1;
        let read = lua.replace('@', &format!("ARGV[{}]", self.argv));
        let _ = writeln!(self.text, "local {name} = {read}");
    }

    /// The argument tail: items of `fields` (name, how each is read) to the end of `ARGV`.
    /// The script reads them as columns: `NAME_FIELD[i]` is field FIELD of item i (from 1),
    /// `NAME_n` the number of items (one loop here, no function call per item there).
    pub(crate) fn tail(&mut self, name: &str, fields: &[(&str, &str)]) {
        let first = self.argv + 1;
        let width = fields.len();
        let columns: Vec<String> = fields.iter().map(|(f, _)| format!("{name}_{f}")).collect();
        let _ = writeln!(
            self.text,
            "local {name}_n = (#ARGV - {}) / {width}",
            first - 1
        );
        let empty = vec!["{}"; width].join(", ");
        let _ = writeln!(self.text, "local {} = {empty}", columns.join(", "));
        let mut fill = String::new();
        for (i, ((_, lua), column)) in fields.iter().zip(&columns).enumerate() {
            let read = lua.replace('@', &format!("ARGV[a + {i}]"));
            let _ = write!(fill, " {column}[i] = {read}");
        }
        let _ = writeln!(
            self.text,
            "for i = 1, {name}_n do local a = {first} + (i - 1) * {width}{fill} end"
        );
    }

    /// The header's text.
    pub(crate) fn finish(self) -> String {
        self.text
    }
}

/// Declares a script: see the module's comment. Generates, in the calling module, `Args`
/// (the arguments by name; the tail's items are an [`item!`]) and the static `SCRIPT`.
macro_rules! script {
    (
        file: $file:literal,
        keys: [$($key:ident),* $(,)?],
        $(key_tails: [$($ktail:ident),* $(,)?],)?
        args: { $($(#[$ameta:meta])* $arg:ident : $aty:ty),* $(,)? },
        $(tail: $tail:ident : $item:ty,)?
        reply: $reply:ty $(,)?
    ) => {
        #[doc = concat!("The arguments of `lua/", $file, "`, by name.")]
        #[derive(Debug)]
        pub(crate) struct Args {
            $($(#[$ameta])* pub $arg: $aty,)*
            $($(
                #[doc = concat!("Key tail `", stringify!($ktail), "`.")]
                pub $ktail: Vec<String>,
            )*)?
            $(
                #[doc = concat!("The argument tail: columns `", stringify!($tail), "_FIELD` in Lua.")]
                pub $tail: Vec<$item>,
            )?
        }

        impl $crate::protocol::Encode for Args {
            fn encode(self) -> (Vec<String>, Vec<Vec<u8>>) {
                #[allow(unused_mut)]
                let mut keys: Vec<String> = Vec::new();
                #[allow(unused_mut)]
                let mut argv: Vec<Vec<u8>> = Vec::new();
                $($(
                    $crate::protocol::Arg::put(self.$ktail.len(), &mut argv);
                    keys.extend(self.$ktail);
                )*)?
                $($crate::protocol::Arg::put(self.$arg, &mut argv);)*
                $(
                    for item in self.$tail {
                        $crate::protocol::Item::put(item, &mut argv);
                    }
                )?
                (keys, argv)
            }
        }

        /// The script's Lua header, generated from this declaration.
        fn header() -> String {
            #[allow(unused_mut)]
            let mut h = $crate::protocol::Header::new($file);
            $(h.key($crate::keys::Key::$key.field());)*
            $($(h.key_tail(stringify!($ktail));)*)?
            $(h.arg(stringify!($arg), <$aty as $crate::protocol::Arg>::LUA);)*
            $(h.tail(stringify!($tail), &<$item as $crate::protocol::Item>::fields());)?
            let mut text = h.finish();
            <$reply as $crate::protocol::FromReply>::lua(&mut text);
            text
        }

        #[doc = concat!("`lua/", $file, "`, declared here.")]
        pub(crate) static SCRIPT: $crate::scripts::Script<Args, $reply> =
            $crate::scripts::Script::new($crate::scripts::ScriptDef {
                keys: &[$($crate::keys::Key::$key),*],
                file: $file,
                #[cfg(test)]
                source: include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/lua/", $file)),
                #[cfg(test)]
                header,
                built: std::sync::LazyLock::new(|| {
                    $crate::scripts::build(header(),
                        include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/lua/", $file)))
                }),
            });
    };
}
pub(crate) use script;

#[cfg(test)]
mod tests {
    use super::*;

    reply! {
        /// A test reply.
        struct Pair as "pair" { code: Reply, n: i64 }
    }
    reply! {
        /// A test item.
        flat struct Item as "push_item" { id: JobId, n: i64 }
    }

    #[test]
    fn a_header_names_every_position_once() {
        let mut h = Header::new("x.lua");
        h.key("sched");
        h.key("jobs");
        h.key_tail("sweep");
        h.key_tail("ix");
        h.arg("max", "tonumber(@)");
        h.tail("acks", &[("id", "@"), ("token", "tonumber(@)")]);
        let text = h.finish();
        // (The clock offset comes first.)
        let o = 1;
        assert!(text.contains("local sched = KEYS[1]\nlocal jobs = KEYS[2]\n"));
        let sweep = format!(
            "local sweep_n = tonumber(ARGV[{}])\nlocal sweep_at = 3 ",
            1 + o
        );
        assert!(text.contains(&sweep));
        assert!(text.contains("local ix_at = sweep_at + sweep_n "));
        assert!(text.contains(&format!("local max = tonumber(ARGV[{}])", 3 + o)));
        assert!(text.contains(&format!("local acks_n = (#ARGV - {}) / 2", 3 + o)));
        assert!(text.contains("local acks_id, acks_token = {}, {}"));
        assert!(text.contains(&format!(
            "for i = 1, acks_n do local a = {} + (i - 1) * 2 acks_id[i] = ARGV[a + 0] \
             acks_token[i] = tonumber(ARGV[a + 1]) end",
            4 + o
        )));
    }

    /// Replies built by the generated Lua functions read back as the declared types, on a
    /// real server.
    #[test]
    fn declared_replies_round_trip_through_lua() {
        let server = delayq_test_support::RedisServer::start();
        let mut lua = String::new();
        <Pair as FromReply>::lua(&mut lua);
        <Flat<Item> as FromReply>::lua(&mut lua);
        let script = format!(
            "{lua}local list = {{}} push_item(list, 'a', 1) push_item(list, 'b', 2) \
             return {{ pair{{ code = 4, n = 7 }}, list }}"
        );
        let client = redis::Client::open(server.url()).unwrap();
        let mut conn = client.get_connection().unwrap();
        let v: Value = redis::cmd("EVAL")
            .arg(script)
            .arg(0)
            .query(&mut conn)
            .unwrap();
        let [pair, list]: [Value; 2] = crate::reply::array(v).unwrap().try_into().unwrap();
        let pair = Pair::from_reply(pair).unwrap();
        assert_eq!((pair.code, pair.n), (Reply::Exists, 7));
        let Flat(items) = Flat::<Item>::from_reply(list).unwrap();
        let got: Vec<(&str, i64)> = items.iter().map(|i| (i.id.as_str(), i.n)).collect();
        assert_eq!(got, [("a", 1), ("b", 2)]);
    }
}

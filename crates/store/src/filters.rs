//! WHERE clauses built from a query's optional filters: each combination of filters given is its
//! own statement, so the database plans each with the index that fits it. A single statement
//! written as `(?1 IS NULL OR namespace = ?1)` is planned once for every binding, and SQLite plans
//! it without the namespace index: listing a namespace of ten jobs walked every job in the store.

/// The clauses and parameters so far; `P` is the driver's parameter type.
pub(crate) struct Filters<'a, P: ?Sized> {
    /// How a numbered parameter is written: `$` (PostgreSQL) or `?` (SQLite).
    sigil: char,
    clauses: Vec<String>,
    pub(crate) params: Vec<&'a P>,
}

impl<'a, P: ?Sized> Filters<'a, P> {
    pub(crate) fn new(sigil: char) -> Self {
        Self {
            sigil,
            clauses: Vec::new(),
            params: Vec::new(),
        }
    }

    /// Adds `column op <parameter>` for a present value; an absent one filters nothing.
    pub(crate) fn add(&mut self, column_op: &str, value: Option<&'a P>) {
        if let Some(value) = value {
            self.params.push(value);
            self.clauses
                .push(format!("{column_op} {}{}", self.sigil, self.params.len()));
        }
    }

    /// ` WHERE a AND b`, or nothing when no filter was given.
    pub(crate) fn where_clause(&self) -> String {
        if self.clauses.is_empty() {
            String::new()
        } else {
            format!(" WHERE {}", self.clauses.join(" AND "))
        }
    }

    /// The placeholder of the parameter after the filters' own (a `LIMIT`, say).
    pub(crate) fn next_param(&self) -> String {
        format!("{}{}", self.sigil, self.params.len() + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::Filters;

    #[test]
    fn only_the_given_filters_are_written_and_numbered_in_order() {
        let (namespace, state, after) = (String::from("a"), 1i64, None::<i64>);
        let mut f: Filters<'_, dyn std::fmt::Debug> = Filters::new('?');
        f.add("namespace =", Some(&namespace));
        f.add("id >", after.as_ref().map(|v| v as _));
        f.add("state =", Some(&state));
        assert_eq!(f.where_clause(), " WHERE namespace = ?1 AND state = ?2");
        assert_eq!(f.next_param(), "?3");
        assert_eq!(format!("{:?}", f.params), r#"["a", 1]"#);
        let none: Filters<'_, dyn std::fmt::Debug> = Filters::new('$');
        assert_eq!(none.where_clause(), "");
        assert_eq!(none.next_param(), "$1");
    }
}

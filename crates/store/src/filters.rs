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

    /// Adds a parameter that no clause of its own uses, answering its placeholder.
    fn param(&mut self, value: &'a P) -> String {
        self.params.push(value);
        format!("{}{}", self.sigil, self.params.len())
    }

    /// What a job listing reads from, and the column it is ordered by: `jobs` itself, filtered
    /// by `namespace` and from the cursor `after` on, or with label selectors (each a key and,
    /// for an equality, a value) the label index first.
    ///
    /// With a namespace, one selector drives the listing (the first equality, else the first
    /// existence): its index (`job_labels_pair` or `job_labels_key`) holds the namespace's
    /// matching jobs in id order, so a page reads its jobs from the cursor on and stops, however
    /// many jobs the namespace holds; every other selector is one primary-key probe a job read.
    /// `join` keeps the index as the outer loop where the planner would reorder (SQLite's
    /// `CROSS JOIN`). Without a namespace (an admin listing every one), each selector is a probe.
    pub(crate) fn job_source(
        &mut self,
        namespace: Option<&'a P>,
        after: Option<&'a P>,
        selectors: &[(&'a P, Option<&'a P>)],
        join: &str,
    ) -> (String, &'static str) {
        let driver = namespace.and_then(|namespace| {
            let first = selectors
                .iter()
                .position(|(_, value)| value.is_some())
                .unwrap_or(0);
            selectors.get(first).map(|s| (namespace, first, s))
        });
        let Some((namespace, first, &(key, value))) = driver else {
            self.add("namespace =", namespace);
            self.add("id >", after);
            for &(key, value) in selectors {
                self.has_label("jobs.id", key, value);
            }
            return ("jobs".to_owned(), "id");
        };
        let mut inner = format!(
            "SELECT job_id AS label_job FROM job_labels WHERE namespace = {} AND label_key = {}",
            self.param(namespace),
            self.param(key)
        );
        if let Some(value) = value {
            inner += &format!(" AND label_value = {}", self.param(value));
        }
        if let Some(after) = after {
            inner += &format!(" AND job_id > {}", self.param(after));
        }
        for (i, &(key, value)) in selectors.iter().enumerate() {
            if i != first {
                self.has_label("l.label_job", key, value);
            }
        }
        (
            format!("({inner}) AS l {join} jobs ON jobs.id = l.label_job"),
            "l.label_job",
        )
    }

    /// Adds: the job whose id is `job` has the label `key` (with `value`, when given).
    fn has_label(&mut self, job: &str, key: &'a P, value: Option<&'a P>) {
        let mut clause = format!(
            "EXISTS (SELECT 1 FROM job_labels x WHERE x.job_id = {job} AND x.label_key = {}",
            self.param(key)
        );
        if let Some(value) = value {
            clause += &format!(" AND x.label_value = {}", self.param(value));
        }
        clause.push(')');
        self.clauses.push(clause);
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

    #[test]
    fn a_namespaced_label_listing_is_driven_by_its_first_equality() {
        let (ns, after) = (String::from("a"), 7i64);
        let (k1, k2, v2) = (
            String::from("kind"),
            String::from("tenant"),
            String::from("acme"),
        );
        let mut f: Filters<'_, dyn std::fmt::Debug> = Filters::new('?');
        let (from, order) = f.job_source(
            Some(&ns),
            Some(&after),
            &[(&k1, None), (&k2, Some(&v2))],
            "CROSS JOIN",
        );
        assert_eq!(
            from,
            "(SELECT job_id AS label_job FROM job_labels WHERE namespace = ?1 AND label_key = ?2 \
             AND label_value = ?3 AND job_id > ?4) AS l CROSS JOIN jobs ON jobs.id = l.label_job"
        );
        assert_eq!(order, "l.label_job");
        assert_eq!(
            f.where_clause(),
            " WHERE EXISTS (SELECT 1 FROM job_labels x WHERE x.job_id = l.label_job AND \
             x.label_key = ?5)"
        );
        assert_eq!(
            format!("{:?}", f.params),
            r#"["a", "tenant", "acme", 7, "kind"]"#
        );
        // Across namespaces, every selector is a probe of the job.
        let mut f: Filters<'_, dyn std::fmt::Debug> = Filters::new('$');
        let (from, order) = f.job_source(None, None, &[(&k1, None)], "JOIN");
        assert_eq!((from.as_str(), order), ("jobs", "id"));
        assert_eq!(
            f.where_clause(),
            " WHERE EXISTS (SELECT 1 FROM job_labels x WHERE x.job_id = jobs.id AND x.label_key = $1)"
        );
    }
}

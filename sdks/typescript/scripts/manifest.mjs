// Prints, as JSON, what this package covers of the node's API, for scripts/sdk-openapi-check:
// the types tagged `@schema <OpenAPI schema>` in src/ with their property names (read with the
// TypeScript compiler's parser, inherited properties included), the string-literal unions tagged
// the same way (enums), the operation table and the Client's methods with the names each one
// accepts (parameter names, and the properties of its options types), and the webhook headers
// the verifier reads. Run `npm run build` first: the operation table and the header map are
// imported from dist/.

import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

import ts from "typescript";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const src = join(root, "src");

const interfaces = new Map(); // name -> { tags, members, bases }
const aliases = new Map(); // name -> { tags, node }
const classes = new Map(); // name -> { tags, members, bases, node }

function tagsOf(node) {
  const found = [];
  for (const tag of ts.getJSDocTags(node)) {
    if (tag.tagName.text !== "schema") continue;
    const text = typeof tag.comment === "string" ? tag.comment : (tag.comment ?? []).map((c) => c.text).join("");
    found.push(...text.trim().split(/\s+/).filter(Boolean));
  }
  return found;
}

function nameOf(member) {
  const name = member.name;
  if (!name) return undefined;
  if (ts.isIdentifier(name) || ts.isStringLiteral(name)) return name.text;
  return undefined;
}

for (const file of readdirSync(src).filter((f) => f.endsWith(".ts"))) {
  const source = ts.createSourceFile(file, readFileSync(join(src, file), "utf8"), ts.ScriptTarget.Latest, true);
  for (const statement of source.statements) {
    if (ts.isInterfaceDeclaration(statement)) {
      interfaces.set(statement.name.text, {
        tags: tagsOf(statement),
        members: statement.members.map(nameOf).filter(Boolean),
        bases: (statement.heritageClauses ?? []).flatMap((h) => h.types.map((t) => t.expression.getText())),
      });
    } else if (ts.isTypeAliasDeclaration(statement)) {
      aliases.set(statement.name.text, { tags: tagsOf(statement), node: statement.type });
    } else if (ts.isClassDeclaration(statement) && statement.name) {
      const members = [];
      for (const member of statement.members) {
        if (ts.isPropertyDeclaration(member) || ts.isGetAccessor(member) || ts.isMethodDeclaration(member)) {
          const name = nameOf(member);
          if (name) members.push(name);
        }
        if (ts.isConstructorDeclaration(member)) {
          for (const p of member.parameters) {
            if (ts.getModifiers(p)?.length && ts.isIdentifier(p.name)) members.push(p.name.text);
          }
        }
      }
      classes.set(statement.name.text, {
        tags: tagsOf(statement),
        members,
        bases: (statement.heritageClauses ?? []).flatMap((h) => h.types.map((t) => t.expression.getText())),
        node: statement,
      });
    }
  }
}

/** The property names a type node stands for (object types, references, unions, intersections). */
function propsOfType(node, seen = new Set()) {
  if (!node) return [];
  if (ts.isTypeLiteralNode(node)) return node.members.map(nameOf).filter(Boolean);
  if (ts.isUnionTypeNode(node) || ts.isIntersectionTypeNode(node)) return node.types.flatMap((t) => propsOfType(t, seen));
  if (ts.isParenthesizedTypeNode(node)) return propsOfType(node.type, seen);
  if (ts.isTypeReferenceNode(node)) {
    const name = node.typeName.getText();
    if (name === "Omit" || name === "Partial" || name === "Pick") return propsOfType(node.typeArguments?.[0], seen);
    return propsOfName(name, seen);
  }
  return [];
}

function propsOfName(name, seen = new Set()) {
  if (seen.has(name)) return [];
  seen.add(name);
  const iface = interfaces.get(name);
  if (iface) return [...iface.members, ...iface.bases.flatMap((b) => propsOfName(b, seen))];
  const alias = aliases.get(name);
  if (alias) return propsOfType(alias.node, seen);
  const cls = classes.get(name);
  if (cls) {
    const inherited = cls.bases.flatMap((b) => (b === "Error" ? ["message", "name"] : propsOfName(b, seen)));
    return [...cls.members, ...inherited];
  }
  return [];
}

/** The schema tags of the types a type node refers to. */
function schemasOfType(node) {
  if (!node) return [];
  if (ts.isUnionTypeNode(node) || ts.isIntersectionTypeNode(node)) return node.types.flatMap(schemasOfType);
  if (ts.isTypeReferenceNode(node)) {
    const name = node.typeName.getText();
    return (interfaces.get(name) ?? aliases.get(name) ?? classes.get(name))?.tags ?? [];
  }
  return [];
}

function literalsOf(node) {
  if (ts.isUnionTypeNode(node)) return node.types.flatMap(literalsOf);
  if (ts.isLiteralTypeNode(node) && ts.isStringLiteral(node.literal)) return [node.literal.text];
  return [];
}

const schemas = {};
const enums = {};
for (const [name, entry] of [...interfaces, ...aliases, ...classes]) {
  for (const tag of entry.tags) {
    const literals = aliases.has(name) && !classes.has(name) && !interfaces.has(name) ? literalsOf(aliases.get(name).node) : [];
    const props = [...new Set(propsOfName(name))];
    if (literals.length > 0 && props.length === 0) {
      enums[tag] = literals;
    } else {
      if (schemas[tag]) throw new Error(`@schema ${tag} is claimed by two types`);
      schemas[tag] = { model: name, fields: props };
    }
  }
}

const methods = {};
const client = classes.get("Client");
for (const member of client.node.members) {
  if (!ts.isMethodDeclaration(member) || !ts.isIdentifier(member.name)) continue;
  methods[member.name.text] = member.parameters.map((p) => ({
    name: p.name.getText(),
    schemas: schemasOfType(p.type),
    props: [...new Set(propsOfType(p.type))],
  }));
}

const dist = join(root, "dist");
const { operations } = await import(pathToFileURL(join(dist, "operations.js")).href);
const { deliveryHeaders } = await import(pathToFileURL(join(dist, "webhooks.js")).href);

const manifest = {
  sdk: "typescript",
  schemas,
  enums,
  unwrapped: { Error: "the envelope of every error answer; its `error` object becomes ApiError" },
  operations: Object.fromEntries(
    Object.entries(operations).map(([id, op]) => [id, { method: op.method, path: op.path, name: op.client }]),
  ),
  methods,
  webhook: { headers: deliveryHeaders, fields: [...new Set(propsOfName("Delivery"))] },
};
process.stdout.write(`${JSON.stringify(manifest, null, 2)}\n`);

// Random JSON Schemas from the keywords picolm's json_schema sampler supports
// (plugins/json_schema.c): type (one or a list), properties, required,
// additionalProperties, enum, const, items, minItems/maxItems,
// minLength/maxLength, minimum/maximum and the exclusive ones, anyOf, $ref
// to $defs (a recursive one among them), and the schemas of any value.
// Every schema has a finite document; seeded, so a failure replays.

export function rng(seed) {
  let s = (seed >>> 0) || 0x9e3779b9;
  return () => {
    s ^= s << 13; s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5; s >>>= 0;
    return s / 4294967296;
  };
}

const NAMES = ['id', 'name', 'age', 'tags', 'city', 'x', 'y', 'value', 'ok', 'items', 'a b', 'é', 'q"t', 'tab\tkey', 'url', 'n0'];
const WORDS = ['red', 'green', '', 'a "quoted" word', 'é€😀', 'back\\slash', 'new\nline', 'x'];

export function genSchema(r) {
  const pick = (a) => a[Math.floor(r() * a.length)];
  const int = (lo, hi) => lo + Math.floor(r() * (hi - lo + 1));
  const defs = {}, done = [];
  let nDefs = 0;

  const literal = (depth) => {
    switch (int(0, depth > 1 ? 4 : 6)) {
      case 0: return pick(WORDS);
      case 1: return int(-50, 1000);
      case 2: return int(-400, 400) / pick([2, 4, 10, 100]);
      case 3: return pick([null, true, false]);
      case 4: return `w${int(0, 99)}`;
      case 5: return [literal(depth + 1), literal(depth + 1)].slice(0, int(0, 2));
      default: return { [pick(NAMES)]: literal(depth + 1) };
    }
  };

  const bounds = (s, integer) => {
    const scale = integer ? 1 : pick([1, 2, 4, 10, 1000]);
    const lo = int(-2000, 2000) / scale, span = int(integer ? 2 : 1, 3000) / scale;
    if (r() < 0.6) s[r() < 0.3 ? 'exclusiveMinimum' : 'minimum'] = lo;
    if (r() < 0.6) s[r() < 0.3 ? 'exclusiveMaximum' : 'maximum'] = lo + span;
    return s;
  };

  const gen = (depth) => {
    const leaf = ['string', 'integer', 'number', 'boolean', 'null', 'enum', 'const'];
    const kinds = depth >= 3 ? leaf : [...leaf, 'object', 'object', 'array', 'anyOf', 'types', 'any', 'freeobject', 'ref'];
    switch (pick(kinds)) {
      case 'object': {
        const names = [...NAMES].sort(() => r() - 0.5).slice(0, int(0, 4));
        const s = { type: 'object', properties: Object.fromEntries(names.map((k) => [k, gen(depth + 1)])) };
        const req = names.filter(() => r() < 0.5);
        if (req.length || r() < 0.3) s.required = req;
        const ap = r();
        if (ap < 0.5) s.additionalProperties = false;
        else if (ap < 0.6) s.additionalProperties = true;
        return s;
      }
      case 'array': {
        const s = { type: 'array' };
        if (r() < 0.8) s.items = gen(depth + 1);
        if (r() < 0.5) s.minItems = int(0, 3);
        if (r() < 0.5) s.maxItems = (s.minItems || 0) + int(0, 4);
        return s;
      }
      case 'string': {
        const s = { type: 'string' };
        if (r() < 0.5) s.minLength = int(0, 6);
        if (r() < 0.5) s.maxLength = (s.minLength || 0) + int(0, 12);
        return s;
      }
      case 'integer': return bounds({ type: 'integer' }, true);
      case 'number': return bounds({ type: 'number' }, false);
      case 'boolean': return { type: 'boolean' };
      case 'null': return { type: 'null' };
      case 'enum': return { enum: Array.from({ length: int(1, 5) }, () => literal(0)) };
      case 'const': return { const: literal(0) };
      case 'anyOf': return { anyOf: Array.from({ length: int(2, 4) }, () => gen(depth + 1)) };
      case 'types': {
        const s = { type: [...['string', 'integer', 'number', 'boolean', 'null']].sort(() => r() - 0.5).slice(0, int(2, 3)) };
        if (r() < 0.5) s.maxLength = int(0, 8);
        return r() < 0.5 ? bounds(s, false) : s;
      }
      case 'any': return pick([{}, true]);
      case 'freeobject': return { type: 'object' };
      default: { // a $ref: to a new definition, an earlier one, or a recursive tree
        if (done.length && r() < 0.4) return { $ref: `#/$defs/${pick(done)}` };
        if (r() < 0.3) {
          defs.tree = {
            type: 'object',
            properties: { v: { type: 'integer' }, kids: { type: 'array', items: { $ref: '#/$defs/tree' }, maxItems: 2 } },
            required: ['v'], additionalProperties: false,
          };
          return { $ref: '#/$defs/tree' };
        }
        const name = `d${nDefs++}`;
        defs[name] = gen(depth + 1);
        done.push(name); // referred to once complete: no $ref to itself
        return { $ref: `#/$defs/${name}` };
      }
    }
  };

  let root = gen(0);
  if (Object.keys(defs).length) {
    if (root === true) root = {};
    root = { ...root, $defs: defs };
  }
  return root;
}

// Jinja's parser (jinja2/parser.py): statements over the lexer's segments, expressions with
// jinja's precedence (condexpr < or < and < not < compare < +,- < ~ < *,/,//,% < ** < unary <
// postfix/filters/tests). Unknown filters and tests fail at parse time except inside an if
// or a conditional expression, where jinja2's compiler defers them to the call.
#include <set>
#include <utility>

#include "chat/jinja_internal.hpp"

namespace llmk::jinja {

namespace {

constexpr int kMaxParseDepth = 200;

const std::set<std::string, std::less<>>& known_filters() {
  static const std::set<std::string, std::less<>> s = {
      "abs",    "attr",       "batch",       "capitalize", "center",   "count",
      "d",      "default",    "dictsort",    "e",          "escape",   "filesizeformat",
      "first",  "float",      "forceescape", "format",     "groupby",  "indent",
      "int",    "items",      "join",        "last",       "length",   "list",
      "lower",  "map",        "max",         "min",        "pprint",   "random",
      "reject", "rejectattr", "replace",     "reverse",    "round",    "safe",
      "select", "selectattr", "slice",       "sort",       "string",   "striptags",
      "sum",    "title",      "tojson",      "trim",       "truncate", "unique",
      "upper",  "urlencode",  "urlize",      "wordcount",  "wordwrap", "xmlattr"};
  return s;
}

const std::set<std::string, std::less<>>& known_tests() {
  static const std::set<std::string, std::less<>> s = {
      "odd",     "even",   "divisibleby", "defined",  "undefined", "filter", "test",    "none",
      "boolean", "false",  "true",        "integer",  "float",     "lower",  "upper",   "string",
      "mapping", "number", "sequence",    "iterable", "callable",  "sameas", "escaped", "in",
      "==",      "eq",     "equalto",     "!=",       "ne",        ">",      "gt",      "greaterthan",
      ">=",      "ge",     "<",           "lt",       "lessthan",  "<=",     "le"};
  return s;
}

NodeP make(Node::Kind k, int line) {
  auto n = std::make_unique<Node>();
  n->kind = k;
  n->line = line;
  return n;
}

struct Parser {
  std::vector<Segment> segs;
  size_t seg = 0;
  const std::vector<Token>* toks = nullptr;
  size_t ti = 0;
  int line = 1;
  int depth = 0;
  bool soft = false;
  int loops = 0;                                 // enclosing for loops in this scope: where break / continue may stand
  std::vector<std::pair<Node*, bool>> unknowns;  // unknown filters / tests, and whether deferred

  // --- token stream of the current tag
  const Token* peek(size_t k = 0) const { return ti + k < toks->size() ? &(*toks)[ti + k] : nullptr; }
  int cur_line() const { return peek() ? peek()->line : line; }
  bool is_op(std::string_view op, size_t k = 0) const {
    const Token* t = peek(k);
    return t && t->kind == Token::Op && t->s == op;
  }
  bool is_name(std::string_view n, size_t k = 0) const {
    const Token* t = peek(k);
    return t && t->kind == Token::Name && t->s == n;
  }
  bool skip_op(std::string_view op) {
    if (!is_op(op)) return false;
    ++ti;
    return true;
  }
  bool skip_name(std::string_view n) {
    if (!is_name(n)) return false;
    ++ti;
    return true;
  }
  std::string describe() const {
    const Token* t = peek();
    if (!t) return "end of tag";
    if (t->kind == Token::Str) return "string";
    if (t->kind == Token::Int || t->kind == Token::Float) return "number";
    return "'" + t->s + "'";
  }
  void expect_op(std::string_view op) {
    if (!skip_op(op)) fail(cur_line(), "expected '" + std::string(op) + "', got " + describe());
  }
  std::string expect_name() {
    const Token* t = peek();
    if (!t || t->kind != Token::Name) fail(cur_line(), "expected a name, got " + describe());
    ++ti;
    return t->s;
  }
  void expect_end() {
    if (peek()) fail(cur_line(), "expected the end of the tag, got " + describe());
  }

  struct DepthGuard {
    Parser& p;
    explicit DepthGuard(Parser& p) : p(p) {
      if (++p.depth > kMaxParseDepth)
        fail(p.cur_line(), "expression nested deeper than " + std::to_string(kMaxParseDepth));
    }
    ~DepthGuard() { --p.depth; }
  };

  // --- expressions
  NodeP expression(bool with_condexpr = true) {
    DepthGuard g(*this);
    NodeP e = or_expr();
    if (!with_condexpr) return e;
    while (is_name("if")) {
      const size_t first_unknown = unknowns.size();
      const int l = cur_line();
      ++ti;
      NodeP test = or_expr();
      NodeP other;
      if (skip_name("else")) other = expression();
      auto c = make(Node::Cond, l);
      c->a.push_back(std::move(e));
      c->a.push_back(std::move(test));
      c->a.push_back(std::move(other));
      for (size_t k = first_unknown; k < unknowns.size(); ++k) unknowns[k].second = true;
      // expr1 was parsed before the 'if': its unknown names are deferred too
      defer_unknowns(c->a[0].get());
      e = std::move(c);
    }
    return e;
  }
  void defer_unknowns(Node* n) {
    for (auto& [node, deferred] : unknowns)
      if (contains(n, node)) deferred = true;
  }
  static bool uses_name(const Node* n, std::string_view name) {
    if (!n) return false;
    if (n->kind == Node::Name && n->name == name) return true;
    for (const auto& c : n->a)
      if (uses_name(c.get(), name)) return true;
    for (const auto& b : n->bodies)
      for (const auto& c : b)
        if (uses_name(c.get(), name)) return true;
    for (const auto& c : n->else_body)
      if (uses_name(c.get(), name)) return true;
    return false;
  }
  static bool contains(const Node* root, const Node* x) {
    if (!root) return false;
    if (root == x) return true;
    for (const auto& c : root->a)
      if (contains(c.get(), x)) return true;
    return false;
  }
  NodeP or_expr() {
    NodeP l = and_expr();
    while (is_name("or")) {
      const int ln = cur_line();
      ++ti;
      auto n = make(Node::Or, ln);
      n->a.push_back(std::move(l));
      n->a.push_back(and_expr());
      l = std::move(n);
    }
    return l;
  }
  NodeP and_expr() {
    NodeP l = not_expr();
    while (is_name("and")) {
      const int ln = cur_line();
      ++ti;
      auto n = make(Node::And, ln);
      n->a.push_back(std::move(l));
      n->a.push_back(not_expr());
      l = std::move(n);
    }
    return l;
  }
  NodeP not_expr() {
    DepthGuard g(*this);
    if (is_name("not")) {
      auto n = make(Node::Not, cur_line());
      ++ti;
      n->a.push_back(not_expr());
      return n;
    }
    return compare();
  }
  NodeP compare() {
    NodeP first = math1();
    NodeP cmp;
    for (;;) {
      std::string op;
      const Token* t = peek();
      if (t && t->kind == Token::Op &&
          (t->s == "==" || t->s == "!=" || t->s == "<" || t->s == ">" || t->s == "<=" || t->s == ">=")) {
        op = t->s;
        ++ti;
      } else if (is_name("in")) {
        op = "in";
        ++ti;
      } else if (is_name("not") && is_name("in", 1)) {
        op = "notin";
        ti += 2;
      } else {
        break;
      }
      if (!cmp) {
        cmp = make(Node::Compare, first->line);
        cmp->a.push_back(std::move(first));
      }
      cmp->names.push_back(op);
      cmp->a.push_back(math1());
    }
    return cmp ? std::move(cmp) : std::move(first);
  }
  NodeP binary(NodeP l, std::string op, NodeP r) {
    auto n = make(Node::Bin, l->line);
    n->name = std::move(op);
    n->a.push_back(std::move(l));
    n->a.push_back(std::move(r));
    return n;
  }
  NodeP math1() {
    NodeP l = concat();
    while (is_op("+") || is_op("-")) {
      std::string op = peek()->s;
      ++ti;
      l = binary(std::move(l), op, concat());
    }
    return l;
  }
  NodeP concat() {
    NodeP l = math2();
    while (skip_op("~")) l = binary(std::move(l), "~", math2());
    return l;
  }
  NodeP math2() {
    NodeP l = pow_expr();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      std::string op = peek()->s;
      ++ti;
      l = binary(std::move(l), op, pow_expr());
    }
    return l;
  }
  NodeP pow_expr() {
    NodeP l = unary(true);
    while (skip_op("**")) l = binary(std::move(l), "**", unary(true));
    return l;
  }
  NodeP unary(bool with_filter) {
    DepthGuard g(*this);
    NodeP n;
    if (is_op("-") || is_op("+")) {
      n = make(is_op("-") ? Node::Neg : Node::Pos, cur_line());
      ++ti;
      n->a.push_back(unary(false));
    } else {
      n = primary();
    }
    n = postfix(std::move(n));
    if (with_filter) n = filter_expr(std::move(n));
    return n;
  }
  NodeP primary() {
    DepthGuard g(*this);
    const Token* t = peek();
    if (!t) fail(cur_line(), "unexpected end of tag: expected an expression");
    const int l = t->line;
    if (t->kind == Token::Name) {
      ++ti;
      auto n = make(Node::Lit, l);
      if (t->s == "true" || t->s == "True") n->value = Value::boolean(true);
      else if (t->s == "false" || t->s == "False") n->value = Value::boolean(false);
      else if (t->s == "none" || t->s == "None") n->value = Value::none();
      else {
        n->kind = Node::Name;
        n->name = t->s;
      }
      return n;
    }
    if (t->kind == Token::Str) {
      std::string s;
      while (peek() && peek()->kind == Token::Str) s += (*toks)[ti++].s;
      auto n = make(Node::Lit, l);
      n->value = Value::str(std::move(s));
      return n;
    }
    if (t->kind == Token::Int || t->kind == Token::Float) {
      ++ti;
      auto n = make(Node::Lit, l);
      n->value = t->kind == Token::Int ? Value::integer(t->i) : Value::real(t->f);
      return n;
    }
    if (skip_op("(")) {
      if (skip_op(")")) return make(Node::TupleLit, l);
      NodeP e = expression();
      if (skip_op(")")) return e;
      auto tup = make(Node::TupleLit, l);
      tup->a.push_back(std::move(e));
      while (skip_op(",")) {
        if (is_op(")")) break;
        tup->a.push_back(expression());
      }
      expect_op(")");
      return tup;
    }
    if (skip_op("[")) {
      auto n = make(Node::ListLit, l);
      while (!is_op("]")) {
        if (!n->a.empty()) expect_op(",");
        if (is_op("]")) break;
        n->a.push_back(expression());
      }
      expect_op("]");
      return n;
    }
    if (skip_op("{")) {
      auto n = make(Node::DictLit, l);
      while (!is_op("}")) {
        if (!n->a.empty()) expect_op(",");
        if (is_op("}")) break;
        n->a.push_back(expression());
        expect_op(":");
        n->a.push_back(expression());
      }
      expect_op("}");
      return n;
    }
    fail(l, "unexpected " + describe() + " in an expression");
  }
  void call_args(Node& n) {
    expect_op("(");
    for (bool first = true; !is_op(")"); first = false) {
      if (!first) expect_op(",");
      if (is_op(")")) break;
      if (is_op("*") || is_op("**")) fail(cur_line(), "*args / **kwargs in a call are not supported");
      if (peek() && peek()->kind == Token::Name && is_op("=", 1)) {
        n.names.push_back(peek()->s);
        ti += 2;
      } else {
        n.names.emplace_back();
      }
      n.a.push_back(expression());
    }
    expect_op(")");
  }
  NodeP postfix(NodeP n) {
    for (;;) {
      const int l = cur_line();
      if (skip_op(".")) {
        const Token* t = peek();
        if (t && t->kind == Token::Name) {
          auto a = make(Node::Attr, l);
          a->name = t->s;
          a->a.push_back(std::move(n));
          ++ti;
          n = std::move(a);
        } else if (t && t->kind == Token::Int) {
          auto a = make(Node::Item, l);
          a->a.push_back(std::move(n));
          auto k = make(Node::Lit, l);
          k->value = Value::integer(t->i);
          a->a.push_back(std::move(k));
          ++ti;
          n = std::move(a);
        } else {
          fail(l, "expected a name after '.', got " + describe());
        }
      } else if (skip_op("[")) {
        NodeP parts[3];
        bool slice = false;
        if (!is_op(":")) parts[0] = expression();
        if (skip_op(":")) {
          slice = true;
          if (!is_op("]") && !is_op(":")) parts[1] = expression();
          if (skip_op(":") && !is_op("]")) parts[2] = expression();
        }
        if (is_op(",")) fail(l, "tuple subscripts are not supported");
        expect_op("]");
        auto s = make(slice ? Node::Slice : Node::Item, l);
        s->a.push_back(std::move(n));
        if (slice)
          for (auto& p : parts) s->a.push_back(std::move(p));
        else s->a.push_back(std::move(parts[0]));
        n = std::move(s);
      } else if (is_op("(")) {
        auto c = make(Node::Call, l);
        c->a.push_back(std::move(n));
        c->names.emplace_back();  // the callee
        call_args(*c);
        n = std::move(c);
      } else {
        return n;
      }
    }
  }
  std::string dotted_name() {
    std::string name = expect_name();
    while (skip_op(".")) name += "." + expect_name();
    return name;
  }
  void note_unknown(Node* n, bool filter) {
    const auto& known = filter ? known_filters() : known_tests();
    if (!known.count(n->name)) {
      n->flag = true;
      unknowns.emplace_back(n, soft);
    }
  }
  NodeP filter_call(NodeP obj) {  // after '|'
    const int l = cur_line();
    auto f = make(Node::Filter, l);
    f->name = dotted_name();
    f->a.push_back(std::move(obj));
    f->names.emplace_back();
    if (is_op("(")) call_args(*f);
    note_unknown(f.get(), true);
    return f;
  }
  NodeP filter_expr(NodeP n) {
    for (;;) {
      if (skip_op("|")) {
        n = filter_call(std::move(n));
      } else if (is_name("is")) {
        const int l = cur_line();
        ++ti;
        auto t = make(Node::Test, l);
        t->negated = skip_name("not");
        t->name = dotted_name();
        t->a.push_back(std::move(n));
        t->names.emplace_back();
        const Token* p = peek();
        if (is_op("(")) {
          call_args(*t);
        } else if (p &&
                   (p->kind == Token::Name || p->kind == Token::Str || p->kind == Token::Int ||
                    p->kind == Token::Float || is_op("[") || is_op("{")) &&
                   !is_name("else") && !is_name("or") && !is_name("and")) {
          if (is_name("is")) fail(l, "You cannot chain multiple tests with is");
          t->a.push_back(postfix(primary()));
          t->names.emplace_back();
        }
        note_unknown(t.get(), false);
        n = std::move(t);
      } else if (is_op("(")) {
        auto c = make(Node::Call, cur_line());
        c->a.push_back(std::move(n));
        c->names.emplace_back();
        call_args(*c);
        n = std::move(c);
      } else {
        return n;
      }
    }
  }

  // --- statements
  void open(const Segment& s) {
    toks = &s.tokens;
    ti = 0;
    line = s.line;
  }
  // Parses until a block tag in `ends`; returns it with the stream after its name.
  Body body(std::initializer_list<std::string_view> ends, std::string* end_tag) {
    Body out;
    while (seg < segs.size()) {
      Segment& s = segs[seg++];
      if (s.kind == Segment::Text) {
        auto n = make(Node::Text, s.line);
        n->name = std::move(s.text);
        out.push_back(std::move(n));
        continue;
      }
      open(s);
      if (s.kind == Segment::Var) {
        auto n = make(Node::Print, s.line);
        n->a.push_back(expression());
        expect_end();
        out.push_back(std::move(n));
        continue;
      }
      const Token& t = s.tokens[0];
      if (t.kind != Token::Name) fail(t.line, "expected a tag name, got '" + t.s + "'");
      for (std::string_view e : ends)
        if (t.s == e) {
          ti = 1;
          *end_tag = t.s;
          return out;
        }
      ti = 1;
      out.push_back(statement(t.s));
    }
    if (ends.size()) {
      std::string want;
      for (std::string_view e : ends) {
        want += want.empty() ? "'" : " or '";
        want += e;
        want += '\'';
      }
      fail(line, "unexpected end of template: expected " + want);
    }
    return out;
  }
  NodeP statement(const std::string& tag) {
    const int l = line;
    std::string end;
    if (tag == "if") {
      auto n = make(Node::If, l);
      const bool saved = soft;
      soft = true;
      for (;;) {
        n->a.push_back(expression());
        expect_end();
        n->bodies.push_back(body({"elif", "else", "endif"}, &end));
        if (end == "elif") continue;
        if (end == "else") {
          expect_end();
          n->else_body = body({"endif"}, &end);
        }
        break;
      }
      expect_end();
      soft = saved;
      return n;
    }
    if (tag == "for") {
      auto n = make(Node::For, l);
      const bool paren = skip_op("(");
      do n->names.push_back(expect_name());
      while (skip_op(","));
      if (paren) expect_op(")");
      if (!skip_name("in")) fail(cur_line(), "expected 'in' in a for loop, got " + describe());
      n->a.push_back(expression(false));
      if (is_op(",")) fail(cur_line(), "a tuple as a for loop's iterable is not supported");
      n->a.push_back(skip_name("if") ? expression(false) : nullptr);
      n->flag = skip_name("recursive");
      if (n->flag) fail(l, "recursive for loops are not supported");
      expect_end();
      const bool saved = soft;
      soft = false;
      ++loops;
      n->bodies.push_back(body({"endfor", "else"}, &end));
      --loops;
      for (const NodeP& b : n->bodies[0]) n->negated = n->negated || uses_name(b.get(), "loop");
      if (end == "else") {
        expect_end();
        n->else_body = body({"endfor"}, &end);
      }
      expect_end();
      soft = saved;
      return n;
    }
    if (tag == "set") {
      std::string target = expect_name();
      if (skip_op(".")) {
        auto n = make(Node::SetNs, l);
        n->name = target;
        n->names.push_back(expect_name());
        expect_op("=");
        n->a.push_back(expression());
        expect_end();
        return n;
      }
      std::vector<std::string> targets{target};
      while (skip_op(",")) targets.push_back(expect_name());
      if (skip_op("=")) {
        auto n = make(Node::Set, l);
        n->names = std::move(targets);
        NodeP e = expression();
        if (is_op(",")) {
          auto tup = make(Node::TupleLit, l);
          tup->a.push_back(std::move(e));
          while (skip_op(",")) tup->a.push_back(expression());
          e = std::move(tup);
        }
        n->a.push_back(std::move(e));
        expect_end();
        return n;
      }
      if (targets.size() != 1) fail(l, "a block set takes one name");
      auto n = make(Node::SetBlock, l);
      n->name = target;
      while (skip_op("|")) n->a.push_back(filter_call(nullptr));
      expect_end();
      const bool saved = soft;
      soft = false;
      {
        const int saved_loops = std::exchange(loops, 0);
        n->bodies.push_back(body({"endset"}, &end));
        loops = saved_loops;
      }
      expect_end();
      soft = saved;
      return n;
    }
    if (tag == "macro" || tag == "call") {
      auto n = make(tag == "macro" ? Node::Macro : Node::CallBlock, l);
      if (tag == "macro") n->name = expect_name();
      if (tag == "macro" || is_op("(")) {
        expect_op("(");
        while (!is_op(")")) {
          if (!n->names.empty()) expect_op(",");
          n->names.push_back(expect_name());
          n->a.push_back(skip_op("=") ? expression() : nullptr);
        }
        expect_op(")");
      }
      if (tag == "call") {
        NodeP c = expression();
        if (c->kind != Node::Call) fail(l, "expected a call after {% call %}");
        n->a.insert(n->a.begin(), std::move(c));
      }
      expect_end();
      const bool saved = soft;
      soft = false;
      {
        const int saved_loops = std::exchange(loops, 0);
        n->bodies.push_back(body({tag == "macro" ? "endmacro" : "endcall"}, &end));
        loops = saved_loops;
      }
      if (tag == "macro" && peek() && peek()->kind == Token::Name && peek()->s == n->name) ++ti;
      expect_end();
      soft = saved;
      return n;
    }
    if (tag == "filter") {
      auto n = make(Node::FilterBlock, l);
      n->a.push_back(filter_call(nullptr));
      while (skip_op("|")) n->a.push_back(filter_call(nullptr));
      expect_end();
      const bool saved = soft;
      soft = false;
      {
        const int saved_loops = std::exchange(loops, 0);
        n->bodies.push_back(body({"endfilter"}, &end));
        loops = saved_loops;
      }
      expect_end();
      soft = saved;
      return n;
    }
    if (tag == "break" || tag == "continue") {  // jinja2.ext.loopcontrols, which Jinja2ChatFormatter loads
      if (!loops) fail(l, "'" + tag + "' outside of a loop");
      expect_end();
      return make(tag == "break" ? Node::Break : Node::Continue, l);
    }
    if (tag == "generation") {  // Jinja2ChatFormatter's pass-through for HuggingFace's {% generation %}
      expect_end();
      auto n = make(Node::If, l);
      auto t = make(Node::Lit, l);
      t->value = Value::boolean(true);
      n->a.push_back(std::move(t));
      n->bodies.push_back(body({"endgeneration"}, &end));
      expect_end();
      return n;
    }
    static const std::set<std::string, std::less<>> unsupported = {"include", "import", "from",      "extends",
                                                                   "block",   "with",   "autoescape"};
    if (unsupported.count(tag)) fail(l, "the '" + tag + "' tag is not supported");
    fail(l, "unknown tag '" + tag + "'");
  }
};

}  // namespace

Body parse(std::vector<Segment> segments) {
  Parser p;
  p.segs = std::move(segments);
  std::string end;
  Body b = p.body({}, &end);
  for (const auto& [node, deferred] : p.unknowns)
    if (!deferred)
      fail(node->line,
           std::string("no ") + (node->kind == Node::Filter ? "filter" : "test") + " named '" + node->name + "'");
  return b;
}

}  // namespace llmk::jinja

package dev.cycles.internal;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A small JSON reader and writer, so the jar needs no JSON library. Objects read as
 * {@code LinkedHashMap} (member order kept), arrays as {@code ArrayList}, integers as
 * {@code Long} (or {@code BigInteger} beyond a long), other numbers as {@code BigDecimal}
 * (exact), JSON null as Java null. {@link Raw} writes JSON text as it is (metadata stays exact).
 */
public final class Json {
    private final String s;
    private int i;

    private Json(String s) {
        this.s = s;
    }

    /** JSON text embedded as it is by {@link #write}. */
    public record Raw(String json) {}

    /** Parses one JSON value (IllegalArgumentException when it is not JSON). */
    public static Object parse(String text) {
        Json p = new Json(text);
        p.ws();
        Object v = p.value();
        p.ws();
        if (p.i != text.length()) {
            throw p.error("trailing characters");
        }
        return v;
    }

    /** Parses a JSON object. */
    @SuppressWarnings("unchecked")
    public static Map<String, Object> object(String text) {
        Object v = parse(text);
        if (!(v instanceof Map)) {
            throw new IllegalArgumentException("not a JSON object: " + text);
        }
        return (Map<String, Object>) v;
    }

    private IllegalArgumentException error(String what) {
        return new IllegalArgumentException("invalid JSON at " + i + ": " + what);
    }

    private void ws() {
        while (i < s.length()) {
            char c = s.charAt(i);
            if (c != ' ' && c != '\t' && c != '\r' && c != '\n') {
                return;
            }
            i++;
        }
    }

    private Object value() {
        if (i >= s.length()) {
            throw error("unexpected end");
        }
        char c = s.charAt(i);
        switch (c) {
            case '{':
                return obj();
            case '[':
                return arr();
            case '"':
                return str();
            case 't':
                return lit("true", Boolean.TRUE);
            case 'f':
                return lit("false", Boolean.FALSE);
            case 'n':
                return lit("null", null);
            default:
                return num();
        }
    }

    private Object lit(String word, Object v) {
        if (!s.startsWith(word, i)) {
            throw error("unexpected token");
        }
        i += word.length();
        return v;
    }

    private Map<String, Object> obj() {
        Map<String, Object> m = new LinkedHashMap<>();
        i++;
        ws();
        if (i < s.length() && s.charAt(i) == '}') {
            i++;
            return m;
        }
        while (true) {
            ws();
            if (i >= s.length() || s.charAt(i) != '"') {
                throw error("expected a member name");
            }
            String k = str();
            ws();
            expect(':');
            ws();
            m.put(k, value());
            ws();
            if (i < s.length() && s.charAt(i) == ',') {
                i++;
                continue;
            }
            expect('}');
            return m;
        }
    }

    private List<Object> arr() {
        List<Object> l = new ArrayList<>();
        i++;
        ws();
        if (i < s.length() && s.charAt(i) == ']') {
            i++;
            return l;
        }
        while (true) {
            ws();
            l.add(value());
            ws();
            if (i < s.length() && s.charAt(i) == ',') {
                i++;
                continue;
            }
            expect(']');
            return l;
        }
    }

    private void expect(char c) {
        if (i >= s.length() || s.charAt(i) != c) {
            throw error("expected '" + c + "'");
        }
        i++;
    }

    private String str() {
        i++;
        // Most strings have no escape: one substring, no builder (the guarded lifecycle parses
        // an outcome per call).
        int start = i;
        for (int k = i; k < s.length(); k++) {
            char c = s.charAt(k);
            if (c == '"') {
                i = k + 1;
                return s.substring(start, k);
            }
            if (c == '\\') {
                break;
            }
        }
        StringBuilder b = new StringBuilder();
        while (true) {
            if (i >= s.length()) {
                throw error("unterminated string");
            }
            char c = s.charAt(i++);
            if (c == '"') {
                return b.toString();
            }
            if (c != '\\') {
                b.append(c);
                continue;
            }
            char e = s.charAt(i++);
            switch (e) {
                case 'n' -> b.append('\n');
                case 't' -> b.append('\t');
                case 'r' -> b.append('\r');
                case 'b' -> b.append('\b');
                case 'f' -> b.append('\f');
                case 'u' -> {
                    b.append((char) Integer.parseInt(s.substring(i, i + 4), 16));
                    i += 4;
                }
                default -> b.append(e);
            }
        }
    }

    private Object num() {
        int start = i;
        boolean integer = true;
        while (i < s.length()) {
            char c = s.charAt(i);
            if (c == '.' || c == 'e' || c == 'E') {
                integer = false;
            } else if ((c < '0' || c > '9') && c != '+' && c != '-') {
                break;
            }
            i++;
        }
        if (i == start) {
            throw error("unexpected character");
        }
        if (integer && i - start <= 18) {
            // Fits a long: the value BigInteger would give, without a substring or a BigInteger.
            return Long.parseLong(s, start, i, 10);
        }
        String t = s.substring(start, i);
        if (integer) {
            BigInteger b = new BigInteger(t);
            return b.bitLength() < 64 ? (Object) b.longValue() : b;
        }
        return new BigDecimal(t);
    }

    /** The JSON text of a value (Map, List, String, Number, Boolean, null, {@link Raw}). */
    public static String write(Object v) {
        // Room for a guarded spec or a small body without regrowing the builder.
        StringBuilder b = new StringBuilder(512);
        write(b, v);
        return b.toString();
    }

    private static void write(StringBuilder b, Object v) {
        if (v == null) {
            b.append("null");
        } else if (v instanceof Raw r) {
            b.append(r.json());
        } else if (v instanceof String str) {
            quote(b, str);
        } else if (v instanceof Number || v instanceof Boolean) {
            b.append(v);
        } else if (v instanceof Map<?, ?> m) {
            b.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : m.entrySet()) {
                if (!first) {
                    b.append(',');
                }
                first = false;
                quote(b, String.valueOf(e.getKey()));
                b.append(':');
                write(b, e.getValue());
            }
            b.append('}');
        } else if (v instanceof List<?> l) {
            b.append('[');
            for (int k = 0; k < l.size(); k++) {
                if (k > 0) {
                    b.append(',');
                }
                write(b, l.get(k));
            }
            b.append(']');
        } else {
            throw new IllegalArgumentException("cannot write " + v.getClass().getName() + " as JSON");
        }
    }

    private static void quote(StringBuilder b, String str) {
        b.append('"');
        int plain = 0;
        while (plain < str.length()) {
            char c = str.charAt(plain);
            if (c < 0x20 || c == '"' || c == '\\') {
                break;
            }
            plain++;
        }
        // The prefix needing no escape in one append; most strings are all prefix.
        b.append(str, 0, plain);
        for (int k = plain; k < str.length(); k++) {
            char c = str.charAt(k);
            switch (c) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '\n' -> b.append("\\n");
                case '\r' -> b.append("\\r");
                case '\t' -> b.append("\\t");
                default -> {
                    if (c < 0x20) {
                        b.append(String.format("\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
                }
            }
        }
        b.append('"');
    }

    // Typed readers of decoded members (null when absent or JSON null).

    /** A member as a string. */
    public static String str(Map<String, Object> m, String k) {
        Object v = m.get(k);
        return v == null ? null : v.toString();
    }

    /** A member as a Long. */
    public static Long lng(Map<String, Object> m, String k) {
        Object v = m.get(k);
        return v == null ? null : ((Number) v).longValue();
    }

    /** A member as a Boolean. */
    public static Boolean bool(Map<String, Object> m, String k) {
        return (Boolean) m.get(k);
    }

    /** A member as an object. */
    @SuppressWarnings("unchecked")
    public static Map<String, Object> obj(Map<String, Object> m, String k) {
        return (Map<String, Object>) m.get(k);
    }

    /** A member as JSON text (objects and arrays as written by {@link #write}); null when absent. */
    public static String text(Map<String, Object> m, String k) {
        Object v = m.get(k);
        return v == null ? null : write(v);
    }

    /** A member as a read-only list of strings; empty when absent. */
    public static List<String> strings(Map<String, Object> m, String k) {
        return each(list(m, k), Object::toString);
    }

    /** Each row converted, as a read-only list; empty when {@code rows} is null. */
    public static <T> List<T> each(List<Object> rows, java.util.function.Function<Object, T> f) {
        if (rows == null) {
            return List.of();
        }
        List<T> out = new java.util.ArrayList<>(rows.size());
        for (Object o : rows) {
            out.add(f.apply(o));
        }
        return java.util.Collections.unmodifiableList(out);
    }

    /** A member as a list. */
    @SuppressWarnings("unchecked")
    public static List<Object> list(Map<String, Object> m, String k) {
        return (List<Object>) m.get(k);
    }
}

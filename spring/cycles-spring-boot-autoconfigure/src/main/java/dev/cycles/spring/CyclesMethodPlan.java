package dev.cycles.spring;

import dev.cycles.Action;
import dev.cycles.Amount;
import dev.cycles.CreateReservationRequest;
import dev.cycles.GuardSpec;
import dev.cycles.HeartbeatPolicy;
import dev.cycles.Subject;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.CompletionStage;
import org.springframework.beans.factory.BeanFactory;
import org.springframework.context.expression.BeanFactoryResolver;
import org.springframework.context.expression.MethodBasedEvaluationContext;
import org.springframework.core.DefaultParameterNameDiscoverer;
import org.springframework.core.ParameterNameDiscoverer;
import org.springframework.expression.EvaluationContext;
import org.springframework.expression.Expression;
import org.springframework.expression.ParseException;
import org.springframework.expression.spel.SpelNode;
import org.springframework.expression.spel.ast.VariableReference;
import org.springframework.expression.spel.standard.SpelExpression;
import org.springframework.expression.spel.standard.SpelExpressionParser;
import org.springframework.util.ClassUtils;

/**
 * One {@code @Cycles} method, checked and compiled once, when its bean is created: every
 * expression parsed and its variables checked against the method's parameters (a failure is an
 * {@link IllegalStateException} naming the method, the attribute and the expression), the
 * unsupported attributes and return types refused.
 */
final class CyclesMethodPlan {
    private static final SpelExpressionParser PARSER = new SpelExpressionParser();
    private static final ParameterNameDiscoverer NAMES = new DefaultParameterNameDiscoverer();
    private static final String PUBLISHER = "org.reactivestreams.Publisher";

    final Method method;
    final boolean async;
    /** {@code "mono"} or {@code "flux"} for Reactor return types, else null. */
    final String reactive;
    /** The method is evaluated with {@code dry_run: true}, never run. */
    final boolean dryRun;
    private final Expression estimate;
    private final Expression actual;
    private final Expression metadata;
    private final boolean useEstimate;
    private final Value actionKind;
    private final Value actionName;
    private final Value unit;
    private final Value[] subject;
    /** The subject's custom dimensions by key (values literal or SpEL), null when none. */
    private final Map<String, Value> dimensions;
    /** The action's policy tags, null when none. */
    private final List<String> tags;
    private final Cycles cycles;
    private final HeartbeatPolicy policy;
    private final boolean heartbeat;

    /** A literal, or SpEL when its first non-blank character is {@code #}. */
    private record Value(String literal, Expression expression) {
        String get(EvaluationContext ctx, String attribute, Method m) {
            if (expression == null) {
                return literal;
            }
            Object v = expression.getValue(ctx);
            return v == null ? null : v.toString();
        }
    }

    CyclesMethodPlan(Method method, Class<?> targetClass, Cycles c, CyclesProperties props) {
        this.method = method;
        this.cycles = c;
        String where = "@Cycles on " + ClassUtils.getQualifiedMethodName(method, targetClass);
        Class<?> ret = method.getReturnType();
        ClassLoader loader = targetClass.getClassLoader();
        String kind = null;
        if (ClassUtils.isPresent(PUBLISHER, loader)
                && ClassUtils.resolveClassName(PUBLISHER, loader).isAssignableFrom(ret)) {
            if (ret.getName().equals("reactor.core.publisher.Mono")) {
                kind = "mono";
            } else if (ret.getName().equals("reactor.core.publisher.Flux")) {
                kind = "flux";
            } else {
                throw new IllegalStateException(where + ": the reactive return type " + ret.getName()
                        + " is not supported; return a Mono, a Flux, a value or a CompletableFuture (docs/spring.md)");
            }
        }
        reactive = kind;
        async = CompletionStage.class.isAssignableFrom(ret);
        dryRun = c.dryRun();
        if (dryRun) {
            // A dry run does not run the method: the caller gets the server's evaluation instead,
            // so the declared type must hold it (checked now, not at the first call).
            if (kind != null || async) {
                throw new IllegalStateException(where + ": dryRun is not supported on the async return type " + ret.getName()
                        + "; declare the method to return DryRunResult (or Object) (docs/spring.md)");
            }
            if (!ret.isAssignableFrom(DryRunResult.class)) {
                throw new IllegalStateException(where + ": dryRun needs a return type that holds a "
                        + DryRunResult.class.getName() + ", not " + ret.getName()
                        + " (the method is not run; the server's evaluation is returned; docs/spring.md)");
            }
        }
        List<String> tagList = new ArrayList<>();
        for (String t : c.actionTags()) {
            if (t == null || t.isBlank()) {
                throw new IllegalStateException(where + ": actionTags has a blank tag");
            }
            tagList.add(t);
        }
        tags = tagList.isEmpty() ? null : List.copyOf(tagList);
        String est = c.value().isBlank() ? c.estimate() : c.value();
        if (!c.value().isBlank() && !c.estimate().isBlank() && !c.value().equals(c.estimate())) {
            throw new IllegalStateException(where + ": set value or estimate, not both");
        }
        if (est.isBlank()) {
            throw new IllegalStateException(where + ": an estimate is required (value or estimate)");
        }
        Set<String> before = variables(method);
        Set<String> after = new HashSet<>(before);
        after.add("result");
        estimate = parse(where, "estimate", est, before);
        actual = c.actual().isBlank() ? null : parse(where, "actual", c.actual(), after);
        metadata = c.metadata().isBlank() ? null : parse(where, "metadata", c.metadata(), after);
        useEstimate = c.useEstimateIfActualNotProvided();
        actionKind = value(where, "actionKind", c.actionKind(), before, targetClass.getSimpleName());
        actionName = value(where, "actionName", c.actionName(), before, method.getName());
        unit = value(where, "unit", c.unit(), before, null);
        subject = new Value[] {
            value(where, "tenant", c.tenant(), before, props.getTenant()),
            value(where, "workspace", c.workspace(), before, props.getWorkspace()),
            value(where, "app", c.app(), before, props.getApp()),
            value(where, "workflow", c.workflow(), before, props.getWorkflow()),
            value(where, "agent", c.agent(), before, props.getAgent()),
            value(where, "toolset", c.toolset(), before, props.getToolset()),
        };
        Map<String, Value> dims = new LinkedHashMap<>();
        for (String d : c.dimensions()) {
            int eq = d == null ? -1 : d.indexOf('=');
            if (eq <= 0 || d.substring(0, eq).isBlank()) {
                throw new IllegalStateException(where + ": dimensions entry \"" + d + "\" is not key=value");
            }
            String key = d.substring(0, eq).strip();
            if (dims.containsKey(key)) {
                throw new IllegalStateException(where + ": dimensions has the key \"" + key + "\" twice");
            }
            dims.put(key, value(where, "dimensions", d.substring(eq + 1), before, ""));
        }
        dimensions = dims.isEmpty() ? null : dims;
        if (c.heartbeatPolicy().isBlank()) {
            policy = props.getHeartbeat().getPolicy();
        } else {
            try {
                policy = HeartbeatPolicy.valueOf(c.heartbeatPolicy().trim().toUpperCase(Locale.ROOT));
            } catch (IllegalArgumentException e) {
                throw new IllegalStateException(where + ": heartbeatPolicy \"" + c.heartbeatPolicy()
                        + "\" is not WARN, FAIL_ON_FINALIZE or CANCEL");
            }
        }
        heartbeat = c.heartbeat() && props.getHeartbeat().isEnabled();
        if (c.ttlMs() <= 0) {
            throw new IllegalStateException(where + ": ttlMs must be positive, not " + c.ttlMs());
        }
    }

    /** The names an expression over this method may use: its parameters, p0/a0..., args, target. */
    private static Set<String> variables(Method m) {
        Set<String> s = new HashSet<>(Set.of("args", "target", "root", "this"));
        String[] names = NAMES.getParameterNames(m);
        for (int i = 0; i < m.getParameterCount(); i++) {
            s.add("p" + i);
            s.add("a" + i);
            if (names != null) {
                s.add(names[i]);
            }
        }
        if (names == null) {
            s.add("*");
        }
        return s;
    }

    private static Expression parse(String where, String attribute, String text, Set<String> allowed) {
        Expression e;
        try {
            e = PARSER.parseExpression(text);
        } catch (ParseException x) {
            throw new IllegalStateException(where + ": " + attribute + " \"" + text + "\" is not a SpEL expression: "
                    + x.getMessage(), x);
        }
        if (e instanceof SpelExpression spel && !allowed.contains("*")) {
            check(where, attribute, text, spel.getAST(), allowed);
        }
        return e;
    }

    private static void check(String where, String attribute, String text, SpelNode node, Set<String> allowed) {
        if (node instanceof VariableReference) {
            String name = node.toStringAST().substring(1);
            if (!allowed.contains(name)) {
                throw new IllegalStateException(where + ": " + attribute + " \"" + text + "\" uses #" + name
                        + ", which is not a parameter of the method" + (name.equals("result") ? " (#result: in actual and metadata only)" : "")
                        + "; it may use " + new java.util.TreeSet<>(allowed));
            }
        }
        for (int i = 0; i < node.getChildCount(); i++) {
            check(where, attribute, text, node.getChild(i), allowed);
        }
    }

    private static Value value(String where, String attribute, String text, Set<String> allowed, String dflt) {
        if (text == null || text.isBlank()) {
            return new Value(dflt, null);
        }
        if (text.stripLeading().startsWith("#")) {
            return new Value(null, parse(where, attribute, text, allowed));
        }
        return new Value(text, null);
    }

    /** The context of one call: the parameters by name, #args, #target; #result once set. */
    EvaluationContext context(Object target, Object[] args, BeanFactory beans) {
        MethodBasedEvaluationContext ctx = new MethodBasedEvaluationContext(target, method, args, NAMES);
        ctx.setVariable("args", args);
        ctx.setVariable("target", target);
        if (beans != null) {
            ctx.setBeanResolver(new BeanFactoryResolver(beans));
        }
        return ctx;
    }

    long estimate(EvaluationContext ctx) {
        return amount(estimate, ctx, "estimate");
    }

    boolean hasActual() {
        return actual != null;
    }

    boolean useEstimate() {
        return useEstimate;
    }

    /** @return the actual of a returned result */
    long actual(EvaluationContext ctx, Object result) {
        ctx.setVariable("result", result);
        return amount(actual, ctx, "actual");
    }

    @SuppressWarnings("unchecked")
    Map<String, Object> metadata(EvaluationContext ctx, Object result) {
        if (metadata == null) {
            return null;
        }
        ctx.setVariable("result", result);
        Object v = metadata.getValue(ctx);
        if (v != null && !(v instanceof Map)) {
            throw new IllegalArgumentException("@Cycles on " + method.getName() + ": metadata \"" + cycles.metadata()
                    + "\" is a " + v.getClass().getName() + ", not a Map");
        }
        return (Map<String, Object>) v;
    }

    private long amount(Expression e, EvaluationContext ctx, String attribute) {
        Object v = e.getValue(ctx);
        if (v instanceof Number n) {
            if (v instanceof Double || v instanceof Float) {
                double d = n.doubleValue();
                if (d != Math.rint(d)) {
                    throw new IllegalArgumentException(describe(attribute, e) + " is " + v + ", not a whole amount");
                }
            }
            return n.longValue();
        }
        if (v instanceof CharSequence s) {
            try {
                return Long.parseLong(s.toString().trim());
            } catch (NumberFormatException x) {
                // below
            }
        }
        throw new IllegalArgumentException(describe(attribute, e) + " is " + (v == null ? "null" : v + " (" + v.getClass().getName() + ")")
                + ", not a number");
    }

    private String describe(String attribute, Expression e) {
        return "@Cycles on " + method.getDeclaringClass().getSimpleName() + "." + method.getName() + ": " + attribute + " \""
                + e.getExpressionString() + "\"";
    }

    Action action(EvaluationContext ctx) {
        Action a = Action.of(actionKind.get(ctx, "actionKind", method), actionName.get(ctx, "actionName", method));
        return tags == null ? a : a.withTags(tags);
    }

    /** The subject of a call, null when no field or dimension is set (the client's tenant). */
    private Subject subject(EvaluationContext ctx, String clientTenant) {
        String[] f = new String[subject.length];
        boolean any = false;
        for (int i = 0; i < f.length; i++) {
            f[i] = subject[i].get(ctx, "subject", method);
            any |= f[i] != null && !f[i].isBlank();
        }
        Map<String, String> dims = null;
        if (dimensions != null) {
            dims = new LinkedHashMap<>();
            for (Map.Entry<String, Value> e : dimensions.entrySet()) {
                String v = e.getValue().get(ctx, "dimensions", method);
                dims.put(e.getKey(), v == null ? "" : v);
            }
        }
        if (any || dims != null) {
            if (f[0] == null || f[0].isBlank()) {
                f[0] = clientTenant;
            }
            return new Subject(f[0], f[1], f[2], f[3], f[4], f[5], dims);
        }
        return null;
    }

    /** The dry-run reservation request of a call: what {@link #spec} would reserve, with {@code dry_run: true}. */
    CreateReservationRequest dryRunRequest(EvaluationContext ctx, Action action, long est, String clientTenant, String defaultUnit) {
        String u = unit.get(ctx, "unit", method);
        if (u == null || u.isBlank()) {
            u = defaultUnit == null || defaultUnit.isBlank() ? Amount.USD_MICROCENTS : defaultUnit;
        }
        return new CreateReservationRequest(UUID.randomUUID().toString(), subject(ctx, clientTenant), action, new Amount(u, est),
                cycles.ttlMs(), cycles.gracePeriodMs() >= 0 ? cycles.gracePeriodMs() : null,
                cycles.overagePolicy().isBlank() ? null : cycles.overagePolicy(), Boolean.TRUE, null);
    }

    GuardSpec spec(EvaluationContext ctx, Action action, long est, String clientTenant) {
        GuardSpec s = GuardSpec.of(action, est);
        String u = unit.get(ctx, "unit", method);
        if (u != null && !u.isBlank()) {
            s.unit(u);
        }
        Subject sub = subject(ctx, clientTenant);
        if (sub != null) {
            s.subject(sub);
        }
        s.ttlMs(cycles.ttlMs());
        if (cycles.gracePeriodMs() >= 0) {
            s.gracePeriodMs(cycles.gracePeriodMs());
        }
        if (!cycles.overagePolicy().isBlank()) {
            s.overagePolicy(cycles.overagePolicy());
        }
        s.heartbeat(heartbeat);
        s.policy(policy);
        return s;
    }
}

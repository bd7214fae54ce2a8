package dev.cycles.spring;

import dev.cycles.Action;
import dev.cycles.CyclesClient;
import dev.cycles.CyclesException;
import dev.cycles.ReservationResult;
import dev.cycles.errors.BudgetExceededException;
import dev.cycles.Outcome;
import dev.cycles.Reservation;
import dev.cycles.internal.Json;
import java.lang.reflect.Method;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import org.aopalliance.intercept.MethodInterceptor;
import org.aopalliance.intercept.MethodInvocation;
import org.springframework.aop.support.AopUtils;
import org.springframework.beans.factory.BeanFactory;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.core.annotation.AnnotatedElementUtils;
import org.springframework.expression.EvaluationContext;

/**
 * Runs a {@link Cycles @Cycles} method as a guarded action of the SDK: {@code reserve}
 * (heartbeat armed, the reservation the method's {@link Reservation#current()}), the method,
 * then the actual and {@code close}; the core's one lifecycle rule decides what is sent when the
 * method throws (usage it reported is committed, none: released) and the exception propagates
 * unchanged. A {@code CompletionStage} result settles when it completes.
 */
public class CyclesMethodInterceptor implements MethodInterceptor {
    private final ObjectProvider<CyclesClient> client;
    private final ObjectProvider<CyclesProperties> props;
    private final BeanFactory beans;
    private final ObjectProvider<CyclesObserver> observers;
    private final Map<Method, CyclesMethodPlan> plans = new ConcurrentHashMap<>();

    public CyclesMethodInterceptor(ObjectProvider<CyclesClient> client, ObjectProvider<CyclesProperties> props, BeanFactory beans,
            ObjectProvider<CyclesObserver> observers) {
        this.client = client;
        this.props = props;
        this.beans = beans;
        this.observers = observers;
    }

    /** Tells every observer; one that throws is skipped. */
    void tell(java.util.function.Consumer<CyclesObserver> event) {
        observers.orderedStream().forEach(o -> {
            try {
                event.accept(o);
            } catch (RuntimeException e) {
                // an observer's failure is not the method's
            }
        });
    }

    /** Reserves, telling the observers the decision or the refusal. */
    private Reservation reserve(CyclesClient c, CyclesMethodPlan plan, EvaluationContext ctx, CyclesObserver.ActionName name,
            Action action, long estimate) {
        Reservation r;
        try {
            r = c.reserve(plan.spec(ctx, action, estimate, c.tenant()));
        } catch (RuntimeException e) {
            tell(o -> o.refused(name, e));
            throw e;
        }
        Reservation.Decision d = r.decision();
        tell(o -> o.reserved(name, d));
        return r;
    }

    void finished(CyclesObserver.ActionName name, Reservation r, long t0) {
        long nanos = System.nanoTime() - t0;
        Outcome out = r.outcome().orElse(null);
        tell(o -> o.finished(name, out, nanos));
    }

    /** The checked plan of a method (created, and so checked, once: at startup by {@link CyclesMethodValidator}). */
    CyclesMethodPlan plan(Method specific, Class<?> targetClass) {
        return plans.computeIfAbsent(specific, m -> {
            Cycles c = AnnotatedElementUtils.findMergedAnnotation(m, Cycles.class);
            if (c == null) {
                return null;
            }
            return new CyclesMethodPlan(m, targetClass, c, props.getObject());
        });
    }

    @Override
    public Object invoke(MethodInvocation inv) throws Throwable {
        Object target = inv.getThis();
        Class<?> targetClass = target == null ? inv.getMethod().getDeclaringClass() : AopUtils.getTargetClass(target);
        Method specific = AopUtils.getMostSpecificMethod(inv.getMethod(), targetClass);
        CyclesMethodPlan plan = plan(specific, targetClass);
        if (plan == null) {
            return inv.proceed();
        }
        CyclesClient c = client.getObject();
        EvaluationContext ctx = plan.context(target, inv.getArguments(), beans);
        if (plan.dryRun) {
            return dryRun(plan, c, ctx);
        }
        if (plan.reactive != null) {
            return ReactiveGuard.guard(inv, plan, c, ctx, this);
        }
        if (plan.async) {
            return invokeAsync(inv, plan, c, ctx);
        }
        long estimate = plan.estimate(ctx);
        Action action = plan.action(ctx);
        CyclesObserver.ActionName name = new CyclesObserver.ActionName(action.kind(), action.name());
        long t0 = System.nanoTime();
        Reservation r = reserve(c, plan, ctx, name, action, estimate);
        Object result;
        try {
            try {
                result = inv.proceed();
                report(plan, r, ctx, result, estimate);
            } catch (Throwable t) {
                r.fail();
                r.close();
                throw t;
            }
            r.close();
        } finally {
            finished(name, r, t0);
        }
        return result;
    }

    /**
     * Evaluates the reservation the method would make ({@code dry_run: true}) and returns the
     * evaluation without running the method; a {@code DENY} is a {@link BudgetExceededException}
     * carrying the server's reason code (the protocol answers a dry-run denial as a result, the
     * annotation raises it as the typed budget error, as the official starter does).
     */
    private Object dryRun(CyclesMethodPlan plan, CyclesClient c, EvaluationContext ctx) {
        long estimate = plan.estimate(ctx);
        Action action = plan.action(ctx);
        ReservationResult r = c.createReservation(plan.dryRunRequest(ctx, action, estimate, c.tenant(),
                props.getObject().getDefaultUnit())).body();
        if ("DENY".equals(r.decision())) {
            Map<String, Object> f = new HashMap<>();
            f.put("name", "BUDGET_EXCEEDED");
            f.put("code", CyclesException.errorCodes().getOrDefault("BUDGET_EXCEEDED", 0).longValue());
            f.put("message", "@Cycles dry run of " + plan.method.getName() + " denied"
                    + (r.reasonCode() == null ? "" : ": " + r.reasonCode()));
            f.put("error_code", r.reasonCode());
            if (r.retryAfterMs() != null) {
                f.put("retry_after_seconds", Math.max(0, (r.retryAfterMs() + 999) / 1000));
            }
            throw new BudgetExceededException(f);
        }
        return DryRunResult.of(r);
    }

    /** The actual (and metadata) of a returned result, on the reservation. */
    static void report(CyclesMethodPlan plan, Reservation r, EvaluationContext ctx, Object result, long estimate) {
        Map<String, Object> metadata = plan.metadata(ctx, result);
        if (metadata != null) {
            r.setMetadataJson(Json.write(metadata));
        }
        if (plan.hasActual()) {
            r.setActual(plan.actual(ctx, result));
        } else if (plan.useEstimate() && r.actual().isEmpty()) {
            r.setActual(estimate);
        }
    }

    /**
     * Reserves on the caller's thread (the method runs there, its reservation current), then
     * settles when the stage completes; the caller's current reservation is restored after the
     * call. A refused reservation is the returned future's failure.
     */
    private Object invokeAsync(MethodInvocation inv, CyclesMethodPlan plan, CyclesClient c, EvaluationContext ctx) throws Throwable {
        try {
            return Reservation.propagate(() -> {
                long estimate = plan.estimate(ctx);
                Action action = plan.action(ctx);
                CyclesObserver.ActionName name = new CyclesObserver.ActionName(action.kind(), action.name());
                long t0 = System.nanoTime();
                Reservation r;
                try {
                    r = reserve(c, plan, ctx, name, action, estimate);
                } catch (RuntimeException e) {
                    return CompletableFuture.failedFuture(e);
                }
                Object stage;
                try {
                    stage = inv.proceed();
                    if (stage == null) {
                        throw new IllegalStateException("@Cycles method " + plan.method.getName() + " returned a null future");
                    }
                } catch (Throwable t) {
                    try {
                        r.fail();
                        r.close();
                    } finally {
                        finished(name, r, t0);
                    }
                    throw new Thrown(t);
                }
                CompletableFuture<Object> done = settleWhenDone(plan, r, ctx, (CompletionStage<?>) stage, estimate);
                done.whenComplete((v, x) -> finished(name, r, t0));
                return done;
            }).call();
        } catch (Thrown t) {
            throw t.getCause();
        }
    }

    private static CompletableFuture<Object> settleWhenDone(CyclesMethodPlan plan, Reservation r, EvaluationContext ctx,
            CompletionStage<?> stage, long estimate) {
        return stage.toCompletableFuture().handle((v, ex) -> {
            CompletableFuture<Object> settled;
            if (ex == null) {
                RuntimeException failed = null;
                try {
                    report(plan, r, ctx, v, estimate);
                } catch (RuntimeException e) {
                    failed = e;
                }
                if (failed == null) {
                    settled = r.finishAsync(true).thenApply(o -> (Object) v);
                } else {
                    settled = failAfter(r, failed);
                }
            } else {
                settled = failAfter(r, ex instanceof CompletionException && ex.getCause() != null ? ex.getCause() : ex);
            }
            return settled;
        }).thenCompose(f -> f);
    }

    /** Settles failed work (commit what it reported, else release), then fails with its cause. */
    private static CompletableFuture<Object> failAfter(Reservation r, Throwable cause) {
        return r.finishAsync(false).handle((o, x) -> CompletableFuture.<Object>failedFuture(cause)).thenCompose(f -> f);
    }

    /** Carries the method's own throwable through {@code Callable}. */
    private static final class Thrown extends RuntimeException {
        Thrown(Throwable t) {
            super(null, t, false, false);
        }
    }
}

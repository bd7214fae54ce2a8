package dev.cycles.spring;

import dev.cycles.Action;
import dev.cycles.CyclesClient;
import dev.cycles.Reservation;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicReference;
import org.aopalliance.intercept.MethodInvocation;
import org.reactivestreams.Publisher;
import org.springframework.expression.EvaluationContext;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * {@code @Cycles} on a method returning a {@link Mono} or a {@link Flux} (loaded only then, so
 * Reactor stays optional). Nothing happens before subscription; on subscription: reserve
 * (without blocking), call the method and subscribe to what it returned, with the reservation
 * in the Reactor context under {@code Reservation.class} (report streamed usage with
 * {@code Mono.deferContextual(c -> ...c.get(Reservation.class).addUsage(n))});
 * then settle by the core's rule. {@code #result} is the Mono's value, or the Flux's last
 * element (a stream's final chunk, which carries the usage), null when it emitted none. An
 * error or a cancellation is failed work: the usage reported so far is committed, none is
 * released, and the error propagates.
 */
final class ReactiveGuard {
    private ReactiveGuard() {}

    static Object guard(MethodInvocation inv, CyclesMethodPlan plan, CyclesClient c, EvaluationContext ctx,
            CyclesMethodInterceptor interceptor) {
        if (plan.reactive.equals("mono")) {
            return Mono.defer(() -> run(inv, plan, c, ctx, interceptor, false).singleOrEmpty());
        }
        return Flux.defer(() -> run(inv, plan, c, ctx, interceptor, true));
    }

    @SuppressWarnings("unchecked")
    private static Flux<Object> run(MethodInvocation inv, CyclesMethodPlan plan, CyclesClient c, EvaluationContext ctx,
            CyclesMethodInterceptor interceptor, boolean flux) {
        long estimate;
        Action action;
        try {
            estimate = plan.estimate(ctx);
            action = plan.action(ctx);
        } catch (RuntimeException e) {
            return Flux.error(e);
        }
        CyclesObserver.ActionName name = new CyclesObserver.ActionName(action.kind(), action.name());
        long t0 = System.nanoTime();
        return Mono.fromFuture(() -> c.reserveAsync(plan.spec(ctx, action, estimate, c.tenant())))
                .doOnError(e -> interceptor.tell(o -> o.refused(name, e instanceof RuntimeException re ? re : new RuntimeException(e))))
                .flatMapMany(r -> {
                    Reservation.Decision d = r.decision();
                    interceptor.tell(o -> o.reserved(name, d));
                    Publisher<Object> body;
                    try {
                        body = (Publisher<Object>) inv.proceed();
                    } catch (Throwable t) {
                        return failed(r, t, name, t0, interceptor);
                    }
                    if (body == null) {
                        return failed(r, new IllegalStateException("@Cycles method " + plan.method.getName() + " returned null"),
                                name, t0, interceptor);
                    }
                    AtomicReference<Optional<Object>> last = new AtomicReference<>(Optional.empty());
                    Flux<Object> values = Flux.from(body).doOnNext(v -> last.set(Optional.ofNullable(v)));
                    Flux<Object> settled = values
                            .onErrorResume(e -> failed(r, e, name, t0, interceptor))
                            .concatWith(Mono.defer(() -> {
                                Object result = last.get().orElse(null);
                                try {
                                    CyclesMethodInterceptor.report(plan, r, ctx, result, estimate);
                                } catch (RuntimeException e) {
                                    return failed(r, e, name, t0, interceptor).next();
                                }
                                return Mono.fromFuture(r.finishAsync(true))
                                        .doFinally(s -> interceptor.finished(name, r, t0))
                                        .then(Mono.empty());
                            }))
                            .doOnCancel(() -> r.finishAsync(false).whenComplete((o, x) -> interceptor.finished(name, r, t0)));
                    return settled.contextWrite(cx -> cx.put(Reservation.class, r));
                });
    }

    /** Failed work: commit the usage reported so far (none: release), then the error. */
    private static Flux<Object> failed(Reservation r, Throwable error, CyclesObserver.ActionName name, long t0,
            CyclesMethodInterceptor interceptor) {
        return Mono.fromFuture(r.finishAsync(false)).onErrorResume(x -> Mono.empty())
                .doFinally(s -> interceptor.finished(name, r, t0))
                .thenMany(Flux.error(error));
    }
}

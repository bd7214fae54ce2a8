package dev.cycles.spring;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Runs a Spring bean method as a guarded action of the SDK ({@link dev.cycles.CyclesClient}'s
 * guarded lifecycle): reserve the estimate, keep the lease alive with the heartbeat while the
 * method runs, then commit the actual; a method that throws is released (or, when it had
 * reported usage through {@link dev.cycles.Reservation#current()}, that usage is committed),
 * and its exception propagates unchanged. A reservation that is refused (e.g.
 * {@link dev.cycles.errors.BudgetExceededException}) propagates before the method runs.
 *
 * <p>{@link #estimate()}, {@link #actual()} and {@link #metadata()} are SpEL expressions over the
 * method's parameters by name ({@code #tokens}), {@code #args}, {@code #target} and, for
 * {@code actual} only, {@code #result}; the other string attributes are literals unless their
 * first non-blank character is {@code #}, then SpEL too. Every expression is parsed, and its
 * variables checked against the method's parameters, when the bean is created: a bad one fails
 * the application's startup.
 *
 * <p>Methods returning {@link java.util.concurrent.CompletableFuture} or
 * {@link java.util.concurrent.CompletionStage} settle when the stage completes ({@code #result}
 * is its value). With Reactor, methods returning {@code Mono} / {@code Flux} are guarded on
 * subscription, the reservation in the Reactor context under {@code Reservation.class}
 * ({@code #result}: the Mono's value, the Flux's last element); other
 * {@code org.reactivestreams.Publisher} types fail the startup.
 *
 * <p>The attribute names are those of the official {@code cycles-spring-boot-starter}'s
 * annotation, so its usages compile unchanged after the import is changed (docs/spring.md).
 */
@Target(ElementType.METHOD)
@Retention(RetentionPolicy.RUNTIME)
@Documented
public @interface Cycles {
    /** @return the estimate as SpEL (synonym of {@link #estimate()}: set one of them) */
    String value() default "";

    /** @return the estimate as SpEL, e.g. {@code "#tokens * 10"}; a number literal works */
    String estimate() default "";

    /** @return the actual as SpEL over the arguments and {@code #result}; blank: see {@link #useEstimateIfActualNotProvided()} */
    String actual() default "";

    /**
     * @return with a blank {@link #actual()}: true commits the estimate unless the method
     *     reported usage itself ({@code Reservation.current()}); false leaves the actual to the
     *     method, and a method that reported none is released with
     *     {@link dev.cycles.errors.MissingActualException} (core's lifecycle rule)
     */
    boolean useEstimateIfActualNotProvided() default true;

    /** @return the action kind (default: the bean class's simple name) */
    String actionKind() default "";

    /** @return the action name (default: the method's name) */
    String actionName() default "";

    /** @return the unit (default: the client's, {@code cycles.default-unit}, else {@code USD_MICROCENTS}) */
    String unit() default "";

    /** @return the subject's tenant (default: {@code cycles.tenant}) */
    String tenant() default "";

    /** @return the subject's workspace (default: {@code cycles.workspace}) */
    String workspace() default "";

    /** @return the subject's app (default: {@code cycles.app}) */
    String app() default "";

    /** @return the subject's workflow (default: {@code cycles.workflow}) */
    String workflow() default "";

    /** @return the subject's agent (default: {@code cycles.agent}) */
    String agent() default "";

    /** @return the subject's toolset (default: {@code cycles.toolset}) */
    String toolset() default "";

    /** @return the lease in milliseconds */
    long ttlMs() default 60000;

    /** @return the grace period in milliseconds; -1: not sent (the server's default) */
    long gracePeriodMs() default -1;

    /** @return {@code REJECT}, {@code ALLOW_IF_AVAILABLE} or {@code ALLOW_WITH_OVERDRAFT} */
    String overagePolicy() default "ALLOW_IF_AVAILABLE";

    /** @return false: no heartbeat (the lease is not extended while the method runs) */
    boolean heartbeat() default true;

    /** @return {@code WARN}, {@code FAIL_ON_FINALIZE} or {@code CANCEL}; blank: {@code cycles.heartbeat.policy} */
    String heartbeatPolicy() default "";

    /**
     * @return commit metadata as SpEL evaluating to a {@code Map} (after the method returned,
     *     {@code #result} available), sent as the commit's metadata object
     */
    String metadata() default "";

    /**
     * @return evaluate instead of run: the method is not called; the reservation it would make
     *     (the same estimate, subject, action and unit) is sent with {@code dry_run: true} and
     *     the server's evaluation returned as a {@link DryRunResult} (nothing is held); a
     *     {@code DENY} throws {@link dev.cycles.errors.BudgetExceededException}. The method must
     *     return {@code DryRunResult} or a supertype, and not be async or reactive: otherwise
     *     the startup fails (docs/spring.md)
     */
    boolean dryRun() default false;

    /**
     * @return the subject's custom dimensions (the protocol's {@code Subject.dimensions}) as
     *     {@code key=value} entries, e.g. {@code {"cost_center=42", "project=#project"}}: a value
     *     is a literal unless its first non-blank character is {@code #} (SpEL over the
     *     parameters); an entry that is not {@code key=value}, or a key given twice, fails the
     *     startup
     */
    String[] dimensions() default {};

    /**
     * @return the action's policy tags (the protocol's {@code Action.tags}), literals, e.g.
     *     {@code {"prod", "customer-facing"}}; a blank tag fails the startup
     */
    String[] actionTags() default {};
}

// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

//go:build integ

package node_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// appSwitch is the image ENV that turns this test binary into the test
// container program (see TestMain).
const appSwitch = "NODETEST_APP=1"

// grpcService is the service name the app's gRPC health server knows.
const grpcService = "nodetest"

// runApp is the container program: it prints its args and environment,
// serves HTTP on $HTTP_PORT (health, env, controls), a bare TCP listener on
// $TCP_PORT and gRPC health on $GRPC_PORT. $EXIT_AFTER and $EXIT_CODE make
// it exit on its own; $IGNORE_SIGTERM keeps it alive after SIGTERM.
func runApp() {
	fmt.Printf("args=%q\n", os.Args[1:])
	env := os.Environ()
	slices.Sort(env)
	for _, e := range env {
		fmt.Println("env", e)
	}
	a := &app{healthy: true}
	a.signals()
	if d := os.Getenv("EXIT_AFTER"); d != "" {
		wait, _ := time.ParseDuration(d)
		code, _ := strconv.Atoi(os.Getenv("EXIT_CODE"))
		time.AfterFunc(wait, func() { fmt.Println("exiting with", code); os.Exit(code) })
	}
	if p := os.Getenv("TCP_PORT"); p != "" {
		a.listenTCP(p)
	}
	if p := os.Getenv("GRPC_PORT"); p != "" {
		go a.serveGRPC(p)
	}
	if p := os.Getenv("HTTP_PORT"); p != "" {
		fmt.Println(http.ListenAndServe(":"+p, a.mux()))
		os.Exit(1)
	}
	select {}
}

type app struct {
	mu      sync.Mutex
	healthy bool
	tcp     net.Listener
	grpc    *health.Server
}

func (a *app) signals() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM)
	go func() {
		<-ch
		fmt.Println("got SIGTERM")
		if os.Getenv("IGNORE_SIGTERM") == "" {
			os.Exit(0)
		}
	}()
}

func (a *app) listenTCP(port string) {
	l, err := net.Listen("tcp", ":"+port)
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	a.tcp = l
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
}

func (a *app) serveGRPC(port string) {
	l, err := net.Listen("tcp", ":"+port)
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	s := grpc.NewServer()
	a.grpc = health.NewServer()
	a.grpc.SetServingStatus(grpcService, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(s, a.grpc)
	fmt.Println(s.Serve(l))
}

// mux: /healthz (200 or 500), /unhealthy (every probe kind fails from now
// on), /env (JSON), /args, /fetch?url= (GET from inside the pod), /whoami
// (SelfSubjectReview through $KUBECONFIG), /say?text= (a line on stdout,
// or on stderr with &stderr=1).
func (a *app) mux() *http.ServeMux {
	m := http.NewServeMux()
	m.HandleFunc("/say", func(_ http.ResponseWriter, r *http.Request) {
		out := os.Stdout
		if r.URL.Query().Get("stderr") != "" {
			out = os.Stderr
		}
		fmt.Fprintln(out, r.URL.Query().Get("text"))
	})
	m.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		a.mu.Lock()
		defer a.mu.Unlock()
		if !a.healthy {
			http.Error(w, "unhealthy", http.StatusInternalServerError)
		}
	})
	m.HandleFunc("/unhealthy", func(http.ResponseWriter, *http.Request) {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.healthy = false
		if a.tcp != nil {
			a.tcp.Close()
		}
		if a.grpc != nil {
			a.grpc.SetServingStatus(grpcService, healthpb.HealthCheckResponse_NOT_SERVING)
		}
	})
	m.HandleFunc("/env", func(w http.ResponseWriter, _ *http.Request) {
		env := map[string]string{}
		for _, e := range os.Environ() {
			k, v, _ := strings.Cut(e, "=")
			env[k] = v
		}
		_ = json.NewEncoder(w).Encode(env)
	})
	m.HandleFunc("/args", func(w http.ResponseWriter, _ *http.Request) { _ = json.NewEncoder(w).Encode(os.Args[1:]) })
	m.HandleFunc("/fetch", func(w http.ResponseWriter, r *http.Request) {
		resp, err := http.Get(r.URL.Query().Get("url"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		_, _ = io.Copy(w, resp.Body)
	})
	m.HandleFunc("/whoami", whoami)
	// /file?path=P returns the file P as this process sees it (its mounts).
	m.HandleFunc("/file", func(w http.ResponseWriter, r *http.Request) {
		b, err := os.ReadFile(r.URL.Query().Get("path"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		_, _ = w.Write(b)
	})
	// /lookup?host=H resolves H as the process's resolver does (its
	// /etc/resolv.conf), answering the addresses as JSON or the error.
	m.HandleFunc("/lookup", func(w http.ResponseWriter, r *http.Request) {
		addrs, err := net.DefaultResolver.LookupHost(r.Context(), r.URL.Query().Get("host"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		slices.Sort(addrs)
		_ = json.NewEncoder(w).Encode(addrs)
	})
	// /write?path=P writes "x" to P and answers with the error, if any.
	m.HandleFunc("/write", func(w http.ResponseWriter, r *http.Request) {
		if err := os.WriteFile(r.URL.Query().Get("path"), []byte("x"), 0o644); err != nil {
			_, _ = io.WriteString(w, err.Error())
			return
		}
		_, _ = io.WriteString(w, "written")
	})
	return m
}

// whoami asks the API server who this pod is, with the pod's kubeconfig.
func whoami(w http.ResponseWriter, r *http.Request) {
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(clientcmd.NewDefaultClientConfigLoadingRules(), nil).ClientConfig()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	out, err := client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	fmt.Fprint(w, out.Status.UserInfo.Username)
}
